"""Load a cross-encoder reranker and score (query, passage) pairs with it.

A cross-encoder reads the query and one passage together and gives one relevance logit; we run
it through plain transformers `AutoModelForSequenceClassification` (sentence-transformers'
CrossEncoder gives the same scores and would add scikit-learn and scipy to the image).
`relevance_score` is the sigmoid of that logit, as CrossEncoder and the Cohere/Jina APIs give it
(0..1, order unchanged).

`Reranker` has the shape `batching.Engine` drives (`tokenize`, `embed_ids`, `dimensions`), so
reranking shares the embedder's dynamic batching and memory bound: its "texts" are
(query, document) pairs and its "vector" is one score per pair.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer
from transformers.utils import logging as hf_logging

from embed_server.config import EmbedderSettings
from embed_server.errors import ModelLoadError, not_downloaded
from embed_server.hardware import resolve_device, resolve_rerank_dtype
from embed_server.model import _TORCH_DTYPES, int8_linear
from embed_server.threads import MAX_SIDE_BY_SIDE, PassThreads

log = logging.getLogger("embedder.rerank")

Pair = tuple[str, str]
_TOKENIZE_CHUNK = 256


def resolve_rerank_model(name: str) -> Path:
    """A local folder as is, or a hub id in the Hugging Face cache (never downloaded)."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path.resolve()
    if path.is_absolute() or name.startswith((".", "~")) or name.count("/") != 1:
        raise ModelLoadError(f"RERANK_MODEL folder {name!r} does not exist")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id=name, local_files_only=True))
    except LocalEntryNotFoundError:
        raise not_downloaded("RERANK_MODEL", name) from None


class Reranker:
    """A loaded cross-encoder: `tokenize` pairs, then `embed_ids` gives one logit per pair."""

    dimensions = 1  # one score per pair (batching.Engine allocates its output with this)

    def __init__(self, settings: EmbedderSettings) -> None:
        self.name = settings.RERANK_MODEL
        hf_logging.disable_progress_bar()
        folder = resolve_rerank_model(settings.RERANK_MODEL)
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
        architectures = config.architectures or []
        # A causal LM (e.g. Qwen3-Reranker, scored on "yes"/"no" logits) would load here with a
        # new random head and give meaningless scores: refuse it rather than serve noise.
        if not any(a.endswith("ForSequenceClassification") for a in architectures):
            raise ModelLoadError(
                f"RERANK_MODEL {self.name}: {architectures or 'no architecture'} is not a "
                "sequence-classification cross-encoder (e.g. cross-encoder/ms-marco-MiniLM-L6-v2, "
                "BAAI/bge-reranker-v2-m3)"
            )
        if config.num_labels != 1:
            raise ModelLoadError(
                f"RERANK_MODEL {self.name}: {config.num_labels} output labels; a reranker has one"
            )
        self.device = resolve_device(settings.EMBED_DEVICE)
        self.dtype = resolve_rerank_dtype(settings.RERANK_DTYPE, self.device)
        self.threads = settings.EMBED_THREADS
        self.pass_threads = PassThreads(self.threads, "reranker")
        self.parallelism = min(MAX_SIDE_BY_SIDE, self.threads) if self.device.type == "cpu" else 1
        self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        limits = [settings.RERANK_MAX_TOKENS]
        for value in (
            getattr(config, "max_position_embeddings", None),
            self.tokenizer.model_max_length,
        ):
            if isinstance(value, int) and 0 < value < 1_000_000:
                limits.append(value)
        # RoBERTa-style models reserve two positions for the padding offset.
        if config.model_type in ("xlm-roberta", "roberta") and len(limits) > 1:
            limits = [min(limits[0], limits[1] - 2), *limits[2:]]
        self.max_input_tokens = min(limits)
        self.segments = getattr(config, "type_vocab_size", 0) > 1  # BERT: query 0, passage 1
        self.model = AutoModelForSequenceClassification.from_pretrained(
            folder, dtype=_TORCH_DTYPES[self.dtype], local_files_only=True
        )
        self.model.eval().to(self.device)
        if self.dtype == "int8":
            # The encoder's Linear layers only: the pooler and the one-logit head are tiny, and
            # the head's output is the score itself.
            self.model = int8_linear(self.model, only=[f"{self.model.base_model_prefix}.encoder."])
        probe = self.embed_ids(self.tokenize([("health check", "a passage")]))
        if probe.shape != (1, 1) or not np.isfinite(probe).all():
            raise ModelLoadError(f"{self.name}: the test forward pass gave no finite score")
        log.info(
            "loaded reranker %s: max %d tokens per pair, %s on %s",
            self.name,
            self.max_input_tokens,
            self.dtype,
            self.device,
        )

    def tokenize(self, pairs: Sequence[Pair]) -> list[np.ndarray]:
        """Token ids of each (query, passage) pair; the longer side is cut to fit the limit."""
        out: list[np.ndarray] = []
        for start in range(0, len(pairs), _TOKENIZE_CHUNK):
            chunk = pairs[start : start + _TOKENIZE_CHUNK]
            encoded = self.tokenizer(
                [q for q, _ in chunk],
                [d for _, d in chunk],
                truncation="longest_first",
                max_length=self.max_input_tokens,
                return_attention_mask=False,
            )
            types = encoded.get("token_type_ids")
            for row, ids in enumerate(encoded["input_ids"]):
                # Segment ids (BERT) ride along as a second row: they matter for the score.
                segments = types[row] if types is not None else [0] * len(ids)
                out.append(np.asarray([ids, segments], dtype=np.int64).T)
        return out

    def embed_ids(self, batch: Sequence[np.ndarray], side_by_side: int = 1) -> np.ndarray:
        """(len(batch), 1) float32 logits for one right-padded forward pass."""
        longest = max(len(ids) for ids in batch)
        input_ids = torch.full((len(batch), longest), self.pad_id, dtype=torch.long)
        segments = torch.zeros((len(batch), longest), dtype=torch.long)
        mask = torch.zeros((len(batch), longest), dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = torch.from_numpy(ids[:, 0])
            segments[row, : len(ids)] = torch.from_numpy(ids[:, 1])
            mask[row, : len(ids)] = 1
        inputs = {"input_ids": input_ids, "attention_mask": mask}
        if self.segments:
            inputs["token_type_ids"] = segments
        if self.device.type != "cpu":
            inputs = {key: value.to(self.device) for key, value in inputs.items()}

        def forward() -> torch.Tensor:
            with torch.inference_mode():
                out: torch.Tensor = self.model(**inputs).logits
                return out

        if self.device.type == "cpu":  # on the threads embed_server.threads gives it
            logits = self.pass_threads.run(forward, len(batch) * longest, side_by_side)
        else:
            logits = forward()
        return logits.float().reshape(-1, 1).cpu().numpy()


def relevance(logits: np.ndarray) -> np.ndarray:
    """Logits -> 0..1 relevance scores (sigmoid), the scale rerank APIs return."""
    return 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
