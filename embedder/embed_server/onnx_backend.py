"""EMBED_BACKEND=onnx: the same model run by ONNX Runtime, exported ahead of time.

`export` (torch.onnx, from the same Hugging Face folder the torch backend loads) writes
`model.fp32.onnx` and, quantised from it, `model.int8.onnx` (`quantize_int8`) into
`onnx_dir(EMBED_ONNX_DIR, folder)`. The image does this in its build stage (`python
embedder/export_onnx.py`); the service only loads the files, never exports at start. The graph
returns the last hidden states; pooling stays model.pool, shared with torch.

    python embedder/export_onnx.py MODEL_FOLDER_OR_HUB_ID [--onnx-dir DIR]
"""

from __future__ import annotations

import hashlib
import logging
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embed_server.errors import ModelLoadError

log = logging.getLogger("embedder.onnx")

FILES = {"fp32": "model.fp32.onnx", "int8": "model.int8.onnx"}
OPSET = 17
# The FFN's down projection (Qwen3 mlp.down_proj, BERT output.dense) reads the activation
# function's long-tailed output: quantising it cost the most accuracy (MiniLM, lowest cosine to
# fp32 over 300 Cranfield documents: 0.990 with it, 0.996 kept in fp32).
_KEEP_FP32 = re.compile(r"down_proj|/layer\.\d+/output/dense")


def int8_excluded(model: Any) -> list[str]:
    """MatMuls left in fp32: those of two activations (attention scores; dynamic quantisation of
    both sides costs accuracy for no weight saved) and the FFN down projections."""
    weights = {init.name for init in model.graph.initializer}
    return [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul"
        and (node.input[1] not in weights or _KEEP_FP32.search(node.name))
    ]


def quantize_int8(fp32: Path, int8: Path) -> None:
    """Dynamic int8: signed weights per output channel, unsigned activations per tensor at run
    time (U8S8, ONNX Runtime's fast path; U8U8 ran no faster than fp32 on the Qwen3 shape).

    Weights use 7 bits (`reduce_range`): on CPUs without VNNI (AVX2 only) ONNX Runtime's U8S8
    kernels add pairs of products in 16 bits, which full-range weights overflow (a random
    1024x3072 MatMul gave a row cosine of -0.38 to fp32 there; 0.9996 with 7 bits). One export
    serves every CPU, and on VNNI CPUs the 7 bits cost little (MiniLM: 0.9941 vs 0.9945)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    excluded = int8_excluded(onnx.load(fp32, load_external_data=False))
    # The quantiser logs every node, and a generic pre-processing hint, on the root logger.
    logging.disable(logging.WARNING)
    try:
        quantize_dynamic(
            fp32,
            int8,
            per_channel=True,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=excluded,
            reduce_range=True,
        )
    finally:
        logging.disable(logging.NOTSET)


def onnx_dir(root: str | Path, folder: Path) -> Path:
    """Where the exports of the model in `folder` live: one sub-folder per model folder."""
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    return Path(root).expanduser() / f"{folder.name}-{digest}"


def onnx_exported(root: str | Path, folder: Path, dtype: str) -> bool:
    """Whether EMBED_ONNX_DIR holds the export of the model in `folder` at `dtype`."""
    return dtype in FILES and (onnx_dir(root, folder) / FILES[dtype]).is_file()


class _HiddenStates(torch.nn.Module):
    """The model with plain tensor inputs/outputs, as the exporter wants it."""

    def __init__(self, model: torch.nn.Module, use_cache: bool) -> None:
        super().__init__()
        self.model = model
        self.kwargs = {"use_cache": False} if use_cache else {}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, **self.kwargs)
        return out.last_hidden_state


def export(folder: Path, out: Path) -> dict[str, Path]:
    """Export the model in `folder` to fp32 ONNX and quantise it to int8; returns both paths."""
    import inspect

    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one log line per export, not a progress bar
    out.mkdir(parents=True, exist_ok=True)
    # Eager attention: exports to plain MatMul/Softmax, which ORT fuses itself.
    model = AutoModel.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager", local_files_only=True
    ).eval()
    use_cache = "use_cache" in inspect.signature(model.forward).parameters
    ids = torch.ones((2, 16), dtype=torch.long)
    mask = torch.ones((2, 16), dtype=torch.long)
    mask[1, :5] = 0  # a padded row, so the mask path is traced as it runs
    fp32 = out / FILES["fp32"]
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")  # the exporter's tracer warnings; the test checks output
        torch.onnx.export(
            _HiddenStates(model, use_cache),
            (ids, mask),
            str(fp32),
            input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "seq"},
                "attention_mask": {0: "batch", 1: "seq"},
                "last_hidden_state": {0: "batch", 1: "seq"},
            },
            opset_version=OPSET,
            dynamo=False,
        )
    int8 = out / FILES["int8"]
    quantize_int8(fp32, int8)
    log.info("exported %s to %s", folder, out)
    return {"fp32": fp32, "int8": int8}


class OnnxModel:
    """An ORT session over one exported file, called like the torch model's forward."""

    def __init__(self, path: Path, threads: int) -> None:
        import onnxruntime as ort

        if not path.is_file():
            raise FileNotFoundError(path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Idle pool threads sleep instead of spinning: with another process on a core, spinning
        # threads steal it from the working ones (6 layers, 2 shared cores: 2.6-3.8 s vs 2.7-6.2).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        # the weights' memory: the file and its external data, if any
        self.size_bytes = sum(p.stat().st_size for p in path.parent.glob(f"{path.name}*"))
        self.inputs = {i.name for i in self.session.get_inputs()}

    def hidden_states(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        feed = {"input_ids": input_ids.numpy(), "attention_mask": mask.numpy()}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        (hidden,) = self.session.run(["last_hidden_state"], feed)
        return torch.from_numpy(hidden)


def load_onnx(settings: Any, folder: Path, dtype: str) -> OnnxModel:
    """The ORT model of `folder` at `dtype` from EMBED_ONNX_DIR; a clear error when not exported."""
    if dtype not in FILES:
        raise ModelLoadError(
            f"EMBED_BACKEND=onnx runs fp32 or int8, not EMBED_DTYPE={dtype} (bf16 is torch's)"
        )
    path = onnx_dir(settings.EMBED_ONNX_DIR, folder) / FILES[dtype]
    if not path.is_file():
        raise ModelLoadError(
            f"EMBED_BACKEND=onnx: no export of {folder} at {path}; run `python "
            f"embedder/export_onnx.py {settings.EMBED_MODEL}` (the image does this at build "
            "time) or set EMBED_BACKEND=torch"
        )
    return OnnxModel(path, settings.EMBED_THREADS)
