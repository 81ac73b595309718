"""Resolve EMBED_DEVICE, EMBED_BACKEND and EMBED_DTYPE to what this machine runs best.

With EMBED_BACKEND=auto and EMBED_DTYPE=auto on a CPU the embedder measures its candidates
(embed_server.autotune, `measures`); the per-class table below is what runs when that is off
(EMBED_AUTO_MEASURE=false), and what a GPU or an explicit setting resolve to.

bf16 is only worth it where the hardware computes it natively: on CPUs with AVX512-BF16 or AMX
it was ~3x faster than fp32 on the Qwen3-0.6B shape (bench/embed_throughput.py), while with the
same CPU limited to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2, like most laptops)
bf16 ran 6-9x slower than fp32. So `auto` asks the CPU, not torch's
`mkldnn._is_mkldnn_bf16_supported()`, which also says yes for plain AVX512 (emulated bf16).
"""

from __future__ import annotations

import os
import platform
from typing import Any

import torch

from embed_server.errors import ModelLoadError

_X86 = {"x86_64", "amd64", "i386", "i686"}


def _mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def resolve_device(setting: str) -> torch.device:
    """EMBED_DEVICE -> a torch device; `cuda` (or `mps`) without one usable is an error, not a
    fallback. auto: a CUDA GPU, else Apple Silicon's GPU (mps, natively on macOS: not under
    Docker, and not tested here: no such machine), else the CPU."""
    if setting == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if _mps_available() else "cpu")
    if setting == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(
            "EMBED_DEVICE=cuda but torch sees no CUDA GPU (a CPU-only torch build, or no NVIDIA "
            "driver/runtime in the container); use EMBED_DEVICE=cpu or auto"
        )
    if setting == "mps" and not _mps_available():
        raise ModelLoadError(
            "EMBED_DEVICE=mps but torch sees no Apple Silicon GPU (mps runs natively on macOS, "
            "not in a container); use EMBED_DEVICE=cpu or auto"
        )
    return torch.device(setting)


def measures(settings: Any, device: torch.device, klass: str | None = None) -> bool:
    """Whether the engine is chosen by measuring (embed_server.autotune): EMBED_BACKEND and
    EMBED_DTYPE both auto, EMBED_AUTO_MEASURE on, on a CPU whose class (`klass`, else this
    CPU's) is not one of FIXED_CLASSES. An explicit setting is used as it is; a GPU runs torch
    (bf16 where it computes it)."""
    return bool(
        settings.EMBED_AUTO_MEASURE
        and settings.EMBED_BACKEND == "auto"
        and settings.EMBED_DTYPE == "auto"
        and device.type == "cpu"
        and (klass or cpu_class(cpu_features())) not in FIXED_CLASSES
    )


def int8_full_range() -> bool:
    """Whether int8 weights may use all 8 bits: on AVX-512 with VNNI. Without VNNI, x86 int8
    kernels add pairs of u8 x s8 products in 16 bits, which full-range weights overflow."""
    if platform.machine().lower() not in _X86:
        return True  # ARM's int8 dot products accumulate in 32 bits
    return torch.backends.cpu.get_cpu_capability() == "AVX512" and torch.cpu._is_vnni_supported()


def int8_down_projection() -> torch.dtype | None:
    """How int8 runs the FFN down projections on this CPU (embed_server.int8): bf16 with AMX,
    two-pass int8 (None) on x86 with VNNI and no AMX (AMD Zen 4, Intel Ice Lake), else fp32."""
    if platform.machine().lower() not in _X86:
        return torch.float32  # two-pass relies on fbgemm's u8 grid, measured on x86 only
    if torch.cpu._is_amx_tile_supported():
        return torch.bfloat16
    return None if int8_full_range() else torch.float32


def int8_gemm() -> str:
    """The quantized engine int8's GEMMs run on: oneDNN with AMX (its int8 tiles: a 20-token
    query's GEMMs 1.45x faster than fbgemm's), else fbgemm (oneDNN ran 0.9x of it without AMX)."""
    if platform.machine().lower() in _X86 and torch.cpu._is_amx_tile_supported():
        return "onednn"
    return "fbgemm"


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
    if device.type != "cpu":  # mps: fp32, the one precision every Apple GPU runs (untested here)
        return "fp32"
    return "bf16" if cpu_has_native_bf16() else "fp32"


# What `auto` runs per CPU class when it does not measure (EMBED_AUTO_MEASURE=false): the
# fastest engine measured within the accuracy bound (cosine >= 0.995 to fp32 per vector on
# MiniLM) among those the default image carries (torch; ONNX Runtime only with an export).
# bench/results/embedding-speed.md has the figures. amx: bf16 ran 4.7x the naive fp32 baseline.
# avx512-bf16 without AMX: bf16 ran 2.3x on an AMD Zen 4 (issue 33), the class's most common
# member, though 0.6-0.9x on an Intel part (and this Xeon with AMX hidden): where that matters,
# measuring decides. avx2: torch fp32 (1.27-1.42x; ONNX Runtime fp32 1.12-1.24x, bf16 is
# emulated there, int8 without VNNI misses the bound or gains nothing). ARM: not measured here.
# avx512-vnni (AVX-512 with VNNI, no BF16: Ice Lake, Cascade Lake, Tiger Lake; issue 50): torch
# int8, per-token scales on all 8 bits with VNNI and two-pass FFN down projections (embed_server
# .int8), never measured at start (FIXED_CLASSES): on a busy Ice Lake Xeon measuring flipped
# between fp32 (1.29x) and torch int8 (1.49x, query 104 ms) from one start to the next. ONNX int8
# (1.84x) and torch.ao's per-tensor int8 (1.87x, query 98 ms) ran faster in that run, but both
# miss the accuracy bound (short inputs: 0.974 and 0.880) and ONNX needs an export the default
# image lacks. Emulated on an AMD Zen 4 class EPYC with BF16 hidden (`bench/embed_throughput.py
# --emulate avx512-vnni`, three --quick runs on 2 busy cores): torch int8 3.47-5.19x the naive
# fp32 pass, min cosine 0.99900 (short inputs 0.99753); no engine within the bound faster (the
# steadiest run: fp32 1.01x, bf16 0.68x, ONNX fp32 1.58x). That host's cores, not an Ice Lake's:
# a native run must confirm the 2.5x goal.
AUTO_ENGINE = {
    "amx": ("torch", "bf16"),
    "avx512-bf16": ("torch", "bf16"),
    "avx512-vnni": ("torch", "int8"),
    "avx2": ("torch", "fp32"),
    "arm": ("torch", "fp32"),
    "other": ("torch", "fp32"),
}
CPU_CLASSES = tuple(AUTO_ENGINE)
# classes whose engine is the table's even when `auto` may measure: a choice that must not flip
# with the machine's load from one start to the next
FIXED_CLASSES = frozenset({"avx512-vnni"})
ONNX_AUTO_DTYPE = "fp32"  # EMBED_BACKEND=onnx with EMBED_DTYPE=auto: within the bound


def cpu_features() -> set[str]:
    """The features `cpu_class` reads, named as /proc/cpuinfo's flags, as this process may use
    them: ONEDNN_MAX_CPU_ISA=AVX2 (a cap on oneDNN, hence on torch's bf16 and int8 kernels)
    removes the AVX-512 and AMX ones, AVX512_CORE_VNNI (Ice Lake's, as `--emulate avx512-vnni`
    sets) BF16 and AMX, AVX512_CORE_BF16 AMX."""
    features = {"avx2"} if torch.backends.cpu.get_cpu_capability() != "DEFAULT" else set()
    if torch.backends.cpu.get_cpu_capability() == "AVX512" and torch.cpu._is_vnni_supported():
        features.add("avx512_vnni")
    if torch.cpu._is_avx512_bf16_supported():
        features.add("avx512_bf16")
    if torch.cpu._is_amx_tile_supported():
        features.add("amx_tile")
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if cap.startswith("AVX2") or cap in {"SSE41", "AVX"}:
        features -= {"avx512_vnni", "avx512_bf16", "amx_tile"}
    elif cap == "AVX512_CORE_VNNI":
        features -= {"avx512_bf16", "amx_tile"}
    elif cap == "AVX512_CORE_BF16":
        features -= {"amx_tile"}
    return features


def cpu_class(features: set[str], machine: str | None = None) -> str:
    """amx (x86 with AMX tiles), avx512-bf16 (AVX512-BF16 without AMX), avx512-vnni (AVX512-VNNI
    without BF16: Ice Lake, Cascade Lake, Tiger Lake), avx2 (other x86 with AVX2), arm, or
    other. `features`: /proc/cpuinfo's flags, or `cpu_features()`."""
    machine = (machine or platform.machine()).lower()
    if machine in {"aarch64", "arm64"}:
        return "arm"
    if machine not in _X86:
        return "other"
    if "amx_tile" in features:
        return "amx"
    if "avx512_bf16" in features:
        return "avx512-bf16"
    if "avx512_vnni" in features:
        return "avx512-vnni"
    return "avx2" if "avx2" in features else "other"


def auto_engine(klass: str, dtype_setting: str = "auto") -> tuple[str, str]:
    """(backend, dtype) EMBED_BACKEND=auto picks for a CPU class without measuring; with an
    explicit EMBED_DTYPE, torch: bf16 is torch's only, and torch's int8 (per-token scales,
    embed_server.int8) keeps the accuracy bound where ONNX Runtime's per-tensor int8 does not
    (MiniLM, one- and two-word inputs: 0.998 vs 0.976)."""
    backend, dtype = AUTO_ENGINE[klass]
    if dtype_setting == "auto":
        return backend, dtype
    return "torch", dtype_setting


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


# What RERANK_DTYPE=auto runs per CPU class (bench/rerank.py, bench/research/rerank_fidelity.py,
# docs/design/reranking.md). avx512-bf16 without AMX: fp32; bf16 ran 0.6x its speed, and torch
# dynamic int8 ran 1.5x but moved the scores (Spearman 0.92 to fp32 over 30 passages), so int8 is
# opt-in. avx2, ARM and others: fp32 (int8 likewise opt-in). amx: bf16, computed natively there
# (as the embedder; not measured for the reranker here).
RERANK_AUTO_DTYPE = {
    "amx": "bf16",
    "avx512-bf16": "fp32",
    "avx512-vnni": "fp32",
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
