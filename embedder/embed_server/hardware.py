"""Resolve EMBED_DEVICE and EMBED_DTYPE to what this machine runs best.

bf16 is only worth it where the hardware computes it natively: on CPUs with AVX512-BF16 or AMX
it was ~3x faster than fp32 on the Qwen3-0.6B shape (bench/embed_throughput.py), while with the
same CPU limited to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2, like most laptops)
bf16 ran 6-9x slower than fp32. So `auto` asks the CPU, not torch's
`mkldnn._is_mkldnn_bf16_supported()`, which also says yes for plain AVX512 (emulated bf16).
"""

from __future__ import annotations

import os
import platform

import torch

from embed_server.errors import ModelLoadError

_X86 = {"x86_64", "amd64", "i386", "i686"}


def resolve_device(setting: str) -> torch.device:
    """EMBED_DEVICE -> a torch device; `cuda` without a usable GPU is an error, not a fallback."""
    if setting == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if setting == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(
            "EMBED_DEVICE=cuda but torch sees no CUDA GPU (a CPU-only torch build, or no NVIDIA "
            "driver/runtime in the container); use EMBED_DEVICE=cpu or auto"
        )
    return torch.device(setting)


def cpu_has_native_bf16() -> bool:
    """True on x86 CPUs with AVX512-BF16 or AMX (Intel Cooper Lake+/Sapphire Rapids+, AMD Zen 4+).

    Other CPUs (most laptops, ARM) get fp32 from `auto`: bf16 there is emulated or unmeasured.
    """
    if platform.machine().lower() not in _X86:
        return False
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def resolve_dtype(setting: str, device: torch.device) -> str:
    """EMBED_DTYPE -> the precision actually used: fp32, bf16 or int8."""
    if setting == "int8" and device.type != "cpu":
        raise ModelLoadError(
            "EMBED_DTYPE=int8 (dynamic quantisation) runs on CPU only; use bf16 or fp32 on "
            f"EMBED_DEVICE={device.type}"
        )
    if setting != "auto":
        return setting
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_has_native_bf16() else "fp32"


# What `auto` runs per CPU class: the fastest setting measured that keeps the accuracy bound (cosine
# >= 0.995 to fp32 per vector on MiniLM, nDCG@10 within 0.005); bench/embed_throughput.py,
# docs/guide/embedder.md. amx: bf16 ran 4.7x the naive fp32 baseline. avx512-bf16 without AMX: bf16
# ran 0.65x, slower than fp32; ONNX Runtime fp32 1.2-1.65x, exact. avx2: every engine measured as on
# an AVX2-only CPU (--emulate-avx2, CPUID without AVX-512/VNNI; two runs and four interleaved
# rounds): torch fp32 1.27-1.42x, ONNX Runtime fp32 1.12-1.24x; the int8 paths that are faster
# (torch 2.1-2.2x, ONNX Runtime 1.6-1.9x) miss the bound (cosine 0.96 / 0.98 on one-word inputs),
# and those that keep it do not speed up there (OpenVINO int8 weights 1.02-1.04x, llama.cpp Q8_0
# 0.52-0.53x). ARM is not measured here: torch fp32.
AUTO_ENGINE = {
    "amx": ("torch", "bf16"),
    "avx512-bf16": ("onnx", "fp32"),
    "avx2": ("torch", "fp32"),
    "arm": ("torch", "fp32"),
    "other": ("torch", "fp32"),
}
CPU_CLASSES = tuple(AUTO_ENGINE)
ONNX_AUTO_DTYPE = "fp32"  # EMBED_BACKEND=onnx with EMBED_DTYPE=auto: within the bound


def cpu_features() -> set[str]:
    """The features `cpu_class` reads, as this process may use them: ONEDNN_MAX_CPU_ISA=AVX2
    (a cap on oneDNN, hence on torch's bf16 kernels) removes the AVX-512 and AMX ones."""
    features = {"avx2"} if torch.backends.cpu.get_cpu_capability() != "DEFAULT" else set()
    if torch.cpu._is_avx512_bf16_supported():
        features.add("avx512_bf16")
    if torch.cpu._is_amx_tile_supported():
        features.add("amx_tile")
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if cap.startswith("AVX2") or cap in {"SSE41", "AVX"}:
        features -= {"avx512_bf16", "amx_tile"}
    return features


def cpu_class(features: set[str], machine: str | None = None) -> str:
    """amx (x86 with AMX tiles), avx512-bf16 (AVX512-BF16 without AMX), avx2 (other x86 with
    AVX2), arm, or other."""
    machine = (machine or platform.machine()).lower()
    if machine in {"aarch64", "arm64"}:
        return "arm"
    if machine not in _X86:
        return "other"
    if "amx_tile" in features:
        return "amx"
    if "avx512_bf16" in features:
        return "avx512-bf16"
    return "avx2" if "avx2" in features else "other"


def auto_engine(klass: str, dtype_setting: str = "auto") -> tuple[str, str]:
    """(backend, dtype) `auto` picks for a CPU class; with an explicit EMBED_DTYPE, the engine
    that runs it best: bf16 is torch's only; int8 is ONNX Runtime's where exported (closer to
    fp32: lowest cosine 0.99 vs torch's 0.96 on MiniLM; torch without an export)."""
    backend, dtype = AUTO_ENGINE[klass]
    if dtype_setting == "auto":
        return backend, dtype
    engines = {"bf16": "torch", "int8": "onnx"}
    return engines.get(dtype_setting, backend), dtype_setting


def resolve_engine(
    backend: str, dtype: str, device: torch.device, klass: str | None = None
) -> tuple[str, str]:
    """EMBED_BACKEND and EMBED_DTYPE -> (backend, dtype) actually used."""
    if device.type != "cpu":
        if backend == "onnx":
            raise ModelLoadError(
                f"EMBED_BACKEND=onnx runs on CPU only; use torch on EMBED_DEVICE={device.type}"
            )
        return "torch", resolve_dtype(dtype, device)
    if backend == "torch":
        if dtype == "auto" and klass is not None:  # a class given: its answer, not this CPU's
            return "torch", "bf16" if klass in {"amx", "avx512-bf16"} else "fp32"
        return "torch", resolve_dtype(dtype, device)
    if backend == "auto":
        klass = klass or cpu_class(cpu_features())
        return auto_engine(klass, dtype)
    if dtype == "bf16":
        raise ModelLoadError("EMBED_BACKEND=onnx runs fp32 or int8, not EMBED_DTYPE=bf16")
    return "onnx", (ONNX_AUTO_DTYPE if dtype == "auto" else dtype)


# What RERANK_DTYPE=auto runs per CPU class (bench/rerank.py, bench/rerank_fidelity.py,
# docs/design/reranking.md). avx512-bf16 without AMX: fp32; bf16 ran 0.6x its speed, and torch
# dynamic int8 ran 1.5x but moved the scores (Spearman 0.92 to fp32 over 30 passages), so int8 is
# opt-in. avx2, ARM and others: fp32 (int8 likewise opt-in). amx: bf16, computed natively there
# (as the embedder; not measured for the reranker here).
RERANK_AUTO_DTYPE = {
    "amx": "bf16",
    "avx512-bf16": "fp32",
    "avx2": "fp32",
    "arm": "fp32",
    "other": "fp32",
}


def resolve_rerank_dtype(setting: str, device: torch.device, klass: str | None = None) -> str:
    """RERANK_DTYPE -> the precision the reranker runs: by CPU class for `auto` on a CPU, bf16
    where a GPU computes it; int8 (dynamic quantisation) on CPU only."""
    if device.type != "cpu":
        if setting == "int8":
            raise ModelLoadError(
                "RERANK_DTYPE=int8 (dynamic quantisation) runs on CPU only; use auto, bf16 or "
                f"fp32 on EMBED_DEVICE={device.type}"
            )
        return resolve_dtype(setting, device)
    if setting != "auto":
        return setting
    return RERANK_AUTO_DTYPE[klass or cpu_class(cpu_features())]
