"""Resolve EMBED_DEVICE and EMBED_DTYPE to what this machine runs best.

bf16 is only worth it where the hardware computes it natively: on CPUs with AVX512-BF16 or AMX
it was ~3x faster than fp32 on the Qwen3-0.6B shape (bench/embed_throughput.py), while with the
same CPU limited to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2, like most laptops)
bf16 ran 6-9x slower than fp32. So `auto` asks the CPU, not torch's
`mkldnn._is_mkldnn_bf16_supported()`, which also says yes for plain AVX512 (emulated bf16).
"""

from __future__ import annotations

import platform

import torch
from errors import ModelLoadError

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
