"""Peer engines measured beside the service's own (bench/embed_throughput.py): OpenVINO and
llama.cpp. Neither is an EMBED_BACKEND: they are here to show what a user could pick instead.

- OpenVINO (`openvino`, `nncf` for int8 weights): the ONNX export the bench makes anyway, read
  by OpenVINO at fp32 (INFERENCE_PRECISION_HINT=f32: it would pick bf16 on CPUs with
  AVX512-BF16) or with int8 weights (nncf.compress_weights, per output channel; the CPU plugin
  quantises activations dynamically). It runs in place of ONNX Runtime inside the service's
  Embedder, so tokenising, padding, pooling, normalising and batching are the service's own.
- llama.cpp (`llama-cpp-python`, built from source; GGUF files written by llama.cpp's
  `convert_hf_to_gguf.py`, found through LLAMA_CPP_CONVERT): its own tokenizer, batching and
  pooling (`pooling_type`: mean for MiniLM, last token for Qwen3), vectors L2-normalised.
  The Qwen3-shaped test model has a word-level tokenizer llama.cpp cannot load, so its texts
  are given to llama.cpp as the service's token ids (same lengths, `<|endoftext|>` last).

Each engine is skipped with a one-line reason when its package or converter is absent.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embed_server.onnx_backend import onnx_dir

# The test tokenizer of qwen3_shape.py is word-level: the converter knows no such vocabulary, so
# it is written as a plain BPE one (its ids are all the bench gives llama.cpp).
_CONVERT = """
import runpy, sys
root = sys.argv[1]
sys.path[:0] = [root, root + "/gguf-py"]
from conversion import base, qwen
known = base.TextModel.get_vocab_base_pre
def pre(self, tokenizer):
    try:
        return known(self, tokenizer)
    except NotImplementedError:
        return "qwen2"
base.TextModel.get_vocab_base_pre = pre
def word_vocab(self):
    self._set_vocab_gpt2()
    self.gguf_writer.add_token_merges(["w 0"])  # llama.cpp's BPE loader wants merges
qwen.Qwen2Model.set_vocab = word_vocab
sys.argv = [root + "/convert_hf_to_gguf.py", *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
GGUF_TYPES = ("f32", "q8_0")  # llama.cpp rows: exact, and the 8-bit peer
OV_TYPES = ("fp32", "int8")


def openvino_missing() -> str | None:
    """Why the OpenVINO rows cannot run, or None."""
    if importlib.util.find_spec("openvino") is None:
        return "openvino not installed (uv pip install openvino nncf)"
    return None


def llama_missing() -> str | None:
    """Why the llama.cpp rows cannot run, or None."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python not installed (it builds from source: docs/embedder.md)"
    convert = os.environ.get("LLAMA_CPP_CONVERT", "")
    if not convert or not Path(convert).is_file():
        return (
            "LLAMA_CPP_CONVERT does not name llama.cpp's convert_hf_to_gguf.py "
            f"({convert or 'unset'}); it is in the llama-cpp-python sdist under vendor/llama.cpp"
        )
    return None


def llama_isa() -> str:
    """The instruction sets this llama.cpp build uses (a build with GGML_NATIVE=OFF and only
    GGML_AVX2/FMA/F16C on runs AVX2 kernels on any CPU: an honest AVX2-class figure)."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    flags = (part.split(":")[-1] for part in info.split("|") if part.strip().endswith("= 1"))
    return " ".join(flag.split("=")[0].strip() for flag in flags)


def convert_gguf(folder: Path, out: Path, outtype: str) -> Path:
    """`folder` (a Hugging Face model) as a GGUF file of `outtype`, in a child process."""
    converter = Path(os.environ["LLAMA_CPP_CONVERT"]).resolve()
    target = out / f"{onnx_dir(out, folder).name}-{outtype}.gguf"  # one name per model folder
    if not target.exists():
        out.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-c", _CONVERT, str(converter.parent), str(folder)]
        subprocess.run(
            [*command, "--outtype", outtype, "--outfile", str(target)],
            check=True,
            timeout=1800,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    return target


class LlamaEmbedder:
    """llama.cpp through llama-cpp-python, `embedding=True`; `embed` -> unit vectors.

    Inputs are cut at `max_tokens` as the service cuts them (the last special token kept):
    llama.cpp itself would fail on inputs past the model's positions.
    """

    def __init__(
        self, path: Path, pooling: str, threads: int, max_tokens: int, token_ids: Any = None
    ) -> None:
        # ggml's OpenMP threads spin at every barrier by default: with another process on a
        # core a 20-token MiniLM input took 1.0 s on 2 threads instead of 0.02 s. Read by libgomp
        # when llama.cpp loads (torch's own OpenMP runtime is a separate library).
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import llama_cpp

        kinds = {
            "mean": llama_cpp.LLAMA_POOLING_TYPE_MEAN,
            "lasttoken": llama_cpp.LLAMA_POOLING_TYPE_LAST,
        }
        self.files = [path]
        self.llm = llama_cpp.Llama(
            model_path=str(path),
            embedding=True,
            pooling_type=kinds[pooling],
            n_ctx=2048,  # = EMBED_BATCH_TOKENS: inputs packed into passes of up to 2048 tokens
            n_batch=2048,
            n_ubatch=2048,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        own = self.llm.tokenize

        def tokenize(text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
            if token_ids is not None:  # the test model's word ids (see the module's docstring)
                return [int(i) for i in token_ids(text.decode())]
            ids = own(text, add_bos, special)
            return ids if len(ids) <= max_tokens else ids[: max_tokens - 1] + ids[-1:]

        self.llm.tokenize = tokenize

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.llm.embed(list(texts), normalize=True), dtype=np.float32)


def convert_openvino(onnx_file: Path, out: Path, dtype: str) -> Path:
    """The ONNX export as OpenVINO IR, fp32 or with int8 weights (nncf), in a child process."""
    target = out / f"{onnx_file.parent.name}-{dtype}.xml"
    if not target.exists():
        out.mkdir(parents=True, exist_ok=True)
        code = (
            "import sys, openvino as ov\n"
            "m = ov.Core().read_model(sys.argv[1])\n"
            "if sys.argv[3] == 'int8':\n"
            "    import nncf\n"
            "    m = nncf.compress_weights(m)\n"
            "ov.save_model(m, sys.argv[2], compress_to_fp16=False)\n"
        )
        subprocess.run(
            [sys.executable, "-c", code, str(onnx_file), str(target), dtype],
            check=True,
            timeout=1800,
            stdout=subprocess.DEVNULL,
        )
    return target


class OpenVinoModel:
    """An OpenVINO compiled model called like onnx_backend.OnnxModel (`hidden_states`)."""

    def __init__(self, path: Path, threads: int) -> None:
        import openvino as ov

        self.files = [path, path.with_suffix(".bin")]
        core = ov.Core()
        self.compiled = core.compile_model(
            str(path),
            "CPU",
            {
                "INFERENCE_NUM_THREADS": threads,
                "INFERENCE_PRECISION_HINT": "f32",  # else bf16 on AVX512-BF16 CPUs
                "PERFORMANCE_HINT": "LATENCY",
            },
        )
        self.request = self.compiled.create_infer_request()
        self.inputs = {port.get_any_name() for port in self.compiled.inputs}

    def hidden_states(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        feed = {"input_ids": input_ids.numpy(), "attention_mask": mask.numpy()}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        result = self.request.infer(feed)
        return torch.from_numpy(np.array(result[self.compiled.output(0)]))


def files_mb(engine: Any) -> float:
    """Size of the converted model files a peer engine loaded (what an image would carry)."""
    holder = getattr(engine, "onnx", engine)
    return sum(f.stat().st_size for f in holder.files) / 2**20


def openvino_embedder(embedder: Any, ir: Path) -> Any:
    """`embedder` (the service's Embedder, loaded as onnx fp32) running OpenVINO instead."""
    embedder.onnx = OpenVinoModel(ir, embedder.threads)
    embedder.parallelism = 1  # one request at a time on its own thread pool, as ONNX Runtime
    return embedder
