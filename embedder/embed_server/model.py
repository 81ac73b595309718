"""Load an embedding model and turn token ids into L2-normalised vectors, pooled the model's way.

We call transformers' AutoModel/AutoTokenizer directly rather than sentence-transformers: the
pooling below is ~15 lines, while sentence-transformers would add scipy and scikit-learn to the
image. The pooling still follows the model's own sentence-transformers files (`modules.json`,
`1_Pooling/config.json`), and the Qwen3 family is embedded exactly as its model card does:
left padding, `<|endoftext|>` appended, last-token pooling, `Instruct: {task}\\nQuery:{text}`.
"""

from __future__ import annotations

import gc
import inspect
import json
import logging
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer
from transformers.utils import logging as hf_logging

from embed_server import autotune, hardware, int8
from embed_server.batching import plan_batches
from embed_server.config import EmbedderSettings
from embed_server.errors import ModelLoadError, not_downloaded
from embed_server.hardware import (
    int8_down_projection,
    int8_full_range,
    int8_gemm,
    measures,
    resolve_device,
    resolve_engine,
)
from embed_server.onnx_backend import OnnxModel, load_onnx
from embed_server.probe import CALIBRATION_QUERIES, CALIBRATION_TEXTS
from embed_server.prompt_cache import PromptCache, stable_prefix
from embed_server.threads import MAX_SIDE_BY_SIDE, PassThreads, set_threads

log = logging.getLogger("embedder.model")

QWEN3_EOT = "<|endoftext|>"
_POOLING_FLAGS = {  # sentence-transformers Pooling config key -> our mode
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_lasttoken": "lasttoken",
}
_TOKENIZE_CHUNK = 256  # texts per tokenizer call: keeps the ids of a huge round compact
_TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "int8": torch.float32}
CALIBRATION_BATCH_TOKENS = 512  # padded tokens per calibration pass


def int8_linear(model: torch.nn.Module, only: Sequence[str] | None = None) -> torch.nn.Module:
    """Dynamic int8 (CPU), the reranker's RERANK_DTYPE=int8 (the embedder's is embed_server.int8):
    Linear weights int8 with per-channel scales, activations quantised per batch at run time.
    `only`: quantise just the Linear layers whose names start with one of these prefixes (the
    rest stay fp32)."""
    # torch.ao's dynamic quantisation is deprecated in favour of torchao, which would be one more
    # dependency; it still works and is the cheapest int8 path on CPU. Only its deprecation
    # notices are silenced (nothing else runs in this block).
    # Per-channel weight scales: cosine to fp32 0.98 vs 0.93 per-tensor (MiniLM).
    qconfig = torch.ao.quantization.per_channel_dynamic_qconfig
    spec: Any = {torch.nn.Linear: qconfig}
    if only is not None:
        spec = {
            name: qconfig
            for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and name.startswith(tuple(only))
        }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, spec, dtype=torch.qint8)


def resolve_model(name: str) -> Path:
    """A local folder as is, or a hub id found in the Hugging Face cache (never downloaded)."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path.resolve()
    if path.is_absolute() or name.startswith((".", "~")) or name.count("/") != 1:
        raise ModelLoadError(f"EMBED_MODEL folder {name!r} does not exist")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id=name, local_files_only=True))
    except LocalEntryNotFoundError:
        raise not_downloaded("EMBED_MODEL", name) from None


def _prompts(folder: Path, is_qwen3: bool, query_task: str) -> dict[str, str]:
    st_config = _read_json(folder / "config_sentence_transformers.json") or {}
    prompts = st_config.get("prompts") or {}
    if is_qwen3:
        return {"query": f"Instruct: {query_task}\nQuery:", "document": ""}
    # e.g. E5's "query: "; none for symmetric models such as MiniLM
    return {kind: prompts.get(kind) or "" for kind in ("query", "document")}


def _max_input_tokens(folder: Path, config: Any, setting: int) -> int:
    limits = [setting]
    st_limit = (_read_json(folder / "sentence_bert_config.json") or {}).get("max_seq_length")
    for value in (st_limit, getattr(config, "max_position_embeddings", None)):
        if isinstance(value, int) and value > 0:
            limits.append(value)
    return min(limits)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def sentence_transformers_pooling(folder: Path) -> str:
    """The pooling the model's sentence-transformers config declares; mean when it declares none."""
    pooling_dir = "1_Pooling"
    for module in _read_json(folder / "modules.json") or []:
        if str(module.get("type", "")).endswith(".Pooling"):
            pooling_dir = module.get("path") or pooling_dir
    config = _read_json(folder / pooling_dir / "config.json")
    if not config:
        return "mean"
    declared = [mode for key, mode in _POOLING_FLAGS.items() if config.get(key)]
    if len(declared) != 1:
        raise ModelLoadError(
            f"{folder / pooling_dir / 'config.json'}: unsupported pooling {config!r} "
            "(one of CLS, mean, max or last-token expected)"
        )
    return declared[0]


def pool(hidden: torch.Tensor, mask: torch.Tensor, mode: str, left_padded: bool) -> torch.Tensor:
    """One float32 vector per sequence from token states (batch, seq, dim) and attention mask."""
    lengths = mask.sum(dim=1)
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    seq = hidden.shape[1]
    if mode == "lasttoken":  # pick first, then upcast: one row per sequence, not the whole batch
        return (hidden[:, -1] if left_padded else hidden[rows, lengths - 1]).float()
    if mode == "cls":
        return (hidden[rows, seq - lengths] if left_padded else hidden[:, 0]).float()
    hidden = hidden.float()  # sums and maxima in fp32 whatever the model's precision
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    if mode == "max":
        return hidden.masked_fill(weights == 0, float("-inf")).max(dim=1).values
    return (hidden * weights).sum(dim=1) / lengths.unsqueeze(-1).to(hidden.dtype)


class Embedder:
    """A loaded model: `tokenize` texts, then `embed_ids` on batches of token ids.

    `engine` (backend, dtype) runs exactly that engine (auto's measuring and the benches);
    without it the settings decide: EMBED_BACKEND=auto with EMBED_DTYPE=auto on a CPU measures
    the candidates (embed_server.autotune) unless EMBED_AUTO_MEASURE=false, which reads the
    per-class table of embed_server.hardware instead.
    """

    model: Any  # the torch model, None while ONNX Runtime runs (load_engine)

    def __init__(self, settings: EmbedderSettings, engine: tuple[str, str] | None = None) -> None:
        self.name = settings.EMBED_MODEL
        self.settings = settings
        hf_logging.disable_progress_bar()  # one log line per load, not a progress bar
        self.folder = folder = resolve_model(settings.EMBED_MODEL)
        self.device = resolve_device(settings.EMBED_DEVICE)
        self.threads = settings.EMBED_THREADS
        # loading on one thread: a thread running ops on several keeps its own OpenMP pool, which
        # slows every other (embed_server.threads.run_wide)
        set_threads(1)
        self.pass_threads = PassThreads(self.threads, "embedder")
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
        self.is_qwen3 = config.model_type == "qwen3"
        self.pooling = "lasttoken" if self.is_qwen3 else sentence_transformers_pooling(folder)

        self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        # Qwen3-Embedding is trained with left padding; other (absolute-position) models need the
        # side their tokenizer declares.
        self.left_padded = self.is_qwen3 or self.tokenizer.padding_side == "left"
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

        self.prompts = _prompts(folder, self.is_qwen3, settings.EMBED_QUERY_TASK)
        self.max_input_tokens = _max_input_tokens(folder, config, settings.EMBED_MAX_TOKENS)
        self._append_eot: int | None = None
        if self.is_qwen3:
            self._check_eot()
        # A causal model's queries run only their own tokens past the instruction's keys and
        # values, kept per loaded engine (embed_server.prompt_cache)
        query_prompt = self.prompt("query")
        self._prompt_ids = (
            stable_prefix(self.tokenize, query_prompt) if self.is_qwen3 and query_prompt else None
        )
        self._prompt_cache: tuple[tuple[Any, ...], PromptCache | None] | None = None
        self._prompt_lock = threading.Lock()
        self.reuse_instruction = True  # False: every token computed (the benches compare)

        self.onnx: OnnxModel | None = None
        # What auto measured and chose (autotune.Decision.report), for /health and the log
        self.decision: dict[str, Any] | None = None
        # A second engine for queries, when auto measured one faster for them (autotune)
        self.query_encoder: Embedder | None = None
        # int8's calibration (what the fp32 pass saw), kept by auto so later starts skip it
        self.calibration: int8.Calibration | None = None
        if engine is not None:
            self.load_engine(*engine)
        elif measures(settings, self.device):
            autotune.decide(self)
        else:
            engine = resolve_engine(settings.EMBED_BACKEND, settings.EMBED_DTYPE, self.device)
            self.load_engine(*engine)
            if self.device.type == "cpu" and (settings.EMBED_BACKEND, settings.EMBED_DTYPE) == (
                "auto",
                "auto",
            ):
                klass = hardware.cpu_class(hardware.cpu_features())
                why = (
                    f"CPU class {klass} is not measured (its choice would flip with load)"
                    if settings.EMBED_AUTO_MEASURE
                    else "EMBED_AUTO_MEASURE=false"
                )
                self.decision = {
                    "measured": False,
                    "reason": f"{why}: {' '.join(engine)}, the table's engine for CPU class "
                    f"{klass}",
                }
        probe = self.embed_ids(self.tokenize(["health check"]))
        if probe.shape[0] != 1 or not np.isfinite(probe).all():
            raise ModelLoadError(f"{self.name}: the test forward pass gave no finite vector")
        self.dimensions = int(probe.shape[1])
        self.matryoshka = self.is_qwen3  # trained for truncated outputs (32..hidden size)
        self._log_loaded(settings)

    def _log_loaded(self, settings: EmbedderSettings) -> None:
        log.info(
            "loaded %s: %d dims, %s pooling, %s padding, max %d tokens, %s %s on %s "
            "(EMBED_BACKEND=%s, EMBED_DTYPE=%s), %d threads, attn=%s",
            self.name,
            self.dimensions,
            self.pooling,
            "left" if self.left_padded else "right",
            self.max_input_tokens,
            self.backend,
            self.dtype,
            self.device,
            settings.EMBED_BACKEND,
            settings.EMBED_DTYPE,
            self.threads,
            "onnx" if self.onnx else getattr(self.model.config, "_attn_implementation", "?"),
        )

    # what one loaded engine is (load_engine, detach_engine)
    _ENGINE = (
        "backend", "dtype", "model", "onnx", "parallelism", "_forward_kwargs", "_prompt_cache"
    )  # fmt: skip

    def load_engine(self, backend: str, dtype: str) -> None:
        """Run `backend` at `dtype` from now on; the engine loaded before is dropped first, so
        that two models are never in memory at once."""
        self.detach_engine()
        gc.collect()
        self.backend, self.dtype = backend, dtype
        if backend == "onnx":
            self.onnx = load_onnx(self.settings, self.folder, dtype)
        else:
            self._load_weights(dtype)
        # CPU: micro-batches run side by side sharing the threads (batching.Engine); a GPU one.
        # ONNX Runtime: one at a time on its own thread pool (runs side by side would share it).
        side_by_side = self.device.type == "cpu" and backend == "torch"
        self.parallelism = min(MAX_SIDE_BY_SIDE, self.threads) if side_by_side else 1

    def detach_engine(self) -> dict[str, Any]:
        """The loaded engine, taken out (auto keeps the fastest so far while it measures the
        next); `attach_engine` puts it back."""
        state = {name: getattr(self, name, None) for name in self._ENGINE}
        self.model = None
        self.onnx = None
        self._prompt_cache = None
        return state

    def attach_engine(self, state: dict[str, Any]) -> None:
        self.detach_engine()
        gc.collect()
        for name, value in state.items():
            setattr(self, name, value)

    def _load_weights(self, dtype: str) -> None:
        torch_dtype = _TORCH_DTYPES[dtype]
        try:
            model = AutoModel.from_pretrained(
                self.folder, dtype=torch_dtype, attn_implementation="sdpa", local_files_only=True
            )
        except ValueError:  # architecture without an SDPA path: its default attention
            model = AutoModel.from_pretrained(self.folder, dtype=torch_dtype, local_files_only=True)
        self.model = model.eval().to(self.device)
        # Decoder models would otherwise build a KV cache for every layer on every pass.
        self._forward_kwargs = (
            {"use_cache": False}
            if "use_cache" in inspect.signature(self.model.forward).parameters
            else {}
        )
        if dtype == "int8":
            self.dtype = "fp32"
            self.parallelism = min(MAX_SIDE_BY_SIDE, self.threads)
            self.quantize_in_place()

    def quantize_in_place(self) -> None:
        """The loaded torch fp32 model becomes int8 (embed_server.int8), calibrated first on
        CALIBRATION_TEXTS unless `calibration` is known (auto keeps it beside its decision)."""
        if (self.backend, self.dtype, self.device.type) != ("torch", "fp32", "cpu"):
            raise ModelLoadError(f"int8 is made from torch fp32 on cpu, not {self.dtype}")
        workers = self.parallelism
        if self.calibration is None:
            self.calibration = self._calibrate(workers)
        down = int8_down_projection()
        int8.quantize(
            self.model, self.calibration, not int8_full_range(), workers, down, int8_gemm()
        )
        self.dtype = "int8"

    def _calibrate(self, workers: int) -> int8.Calibration:
        """What the fp32 model sees of CALIBRATION_TEXTS: a few padded batches, `workers` side
        by side as the engine runs them (padded positions are left out)."""
        queries = [self.prompt("query") + t for t in CALIBRATION_TEXTS[-CALIBRATION_QUERIES:]]
        ids = self.tokenize([*CALIBRATION_TEXTS, *queries])
        batches = [
            self._padded([ids[i] for i in batch])
            for batch in plan_batches([len(x) for x in ids], CALIBRATION_BATCH_TOKENS // workers)
        ]

        def forward(input_ids: torch.Tensor, mask: torch.Tensor) -> None:
            set_threads(max(1, self.threads // workers))
            with torch.inference_mode():
                self.model(input_ids=input_ids, attention_mask=mask, **self._forward_kwargs)

        return int8.calibrate(self.model, batches, forward, workers)

    def size_bytes(self) -> int:
        """Memory of the engine's weights (tensors, int8 packs, or the ONNX file)."""
        if self.onnx is not None:
            return self.onnx.size_bytes
        tensors = [*self.model.parameters(), *self.model.buffers()]
        total = sum(t.numel() * t.element_size() for t in tensors)
        return total + int8.packed_bytes(self.model)

    def _check_eot(self) -> None:
        # The real Qwen3-Embedding tokenizer appends <|endoftext|> in its post-processor; the
        # last-token vector is only meaningful on that token, so add it where a tokenizer lacks it.
        eot = self.tokenizer.get_vocab().get(QWEN3_EOT)
        if eot is None:
            raise ModelLoadError(f"{self.name}: tokenizer has no {QWEN3_EOT} token")
        if self.tokenizer("probe")["input_ids"][-1] != eot:
            log.warning("tokenizer does not append %s; appending it ourselves", QWEN3_EOT)
            self._append_eot = eot

    def prompt(self, input_type: str) -> str:
        return self.prompts.get(input_type, "")

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids per text, truncated to `max_input_tokens` including special tokens."""
        limit = self.max_input_tokens - (1 if self._append_eot is not None else 0)
        out: list[np.ndarray] = []
        for start in range(0, len(texts), _TOKENIZE_CHUNK):
            encoded = self.tokenizer(
                list(texts[start : start + _TOKENIZE_CHUNK]),
                truncation=True,
                max_length=limit,
                return_attention_mask=False,
                return_token_type_ids=False,
            )["input_ids"]
            for ids in encoded:
                if self._append_eot is not None:
                    ids.append(self._append_eot)
                out.append(np.asarray(ids, dtype=np.int64))
        return out

    def _padded(self, batch: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids and attention mask of one batch, padded on the model's side."""
        longest = max(len(ids) for ids in batch)
        input_ids = torch.full((len(batch), longest), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), longest), dtype=torch.long)
        for row, ids in enumerate(batch):
            span = slice(longest - len(ids), longest) if self.left_padded else slice(0, len(ids))
            input_ids[row, span] = torch.from_numpy(ids)
            mask[row, span] = 1
        return input_ids, mask

    def embed_ids(self, batch: Sequence[np.ndarray], side_by_side: int = 1) -> np.ndarray:
        """(len(batch), dimensions) float32 unit vectors for one padded forward pass.

        `side_by_side`: micro-batches running at once, this one included; on CPU they share
        EMBED_THREADS equally.
        """
        if self.onnx is not None:  # its own thread pool, sized at load
            input_ids, mask = self._padded(batch)
            hidden = self.onnx.hidden_states(input_ids, mask)
            vectors = pool(hidden, mask, self.pooling, self.left_padded)
            return torch.nn.functional.normalize(vectors, p=2, dim=-1).numpy()
        prompt = self._prompt_for(batch)
        if prompt is not None:
            cached = len(prompt.ids)

            def forward() -> torch.Tensor:
                with torch.inference_mode():
                    return prompt.last_states(self.model, batch, self.pad_id).float()

        else:
            cached = 0
            input_ids, mask = self._padded(batch)
            if self.device.type != "cpu":
                input_ids, mask = input_ids.to(self.device), mask.to(self.device)

            def forward() -> torch.Tensor:
                with torch.inference_mode():
                    hidden = self.model(
                        input_ids=input_ids, attention_mask=mask, **self._forward_kwargs
                    ).last_hidden_state
                    return pool(hidden, mask, self.pooling, self.left_padded)

        if self.device.type == "cpu":  # on the threads embed_server.threads gives it
            tokens = len(batch) * (max(len(ids) for ids in batch) - cached)
            vectors = self.pass_threads.run(forward, tokens, side_by_side)
        else:
            vectors = forward()
        return torch.nn.functional.normalize(vectors, p=2, dim=-1).cpu().numpy()

    @property
    def instruction_tokens(self) -> int:
        """Tokens of the query instruction a query does not compute (0: none kept)."""
        ids = self._prompt_ids
        return 0 if ids is None or self.onnx is not None else len(ids)

    def _prompt_for(self, batch: Sequence[np.ndarray]) -> PromptCache | None:
        """The loaded engine's cache of the query instruction when every input of `batch`
        starts with it (made on first use: the engine's own weights and precision)."""
        ids = self._prompt_ids
        if not self.reuse_instruction or ids is None or self.model is None:
            return None
        if not PromptCache.starts(ids, batch):
            return None
        key = (id(self.model), self.dtype, self.model.config.num_hidden_layers)
        with self._prompt_lock:
            if self._prompt_cache is None or self._prompt_cache[0] != key:
                self._prompt_cache = (key, PromptCache.build(self.model, ids))
            return self._prompt_cache[1]
