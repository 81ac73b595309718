"""`--emulate avx2|avx512-bf16|avx512-vnni` (bench/embed_throughput.py): measure as on another
CPU class, on this one.

bench/research/avx2_only.c, compiled with gcc and preloaded, turns on Linux's CPUID faulting and
answers CPUID with features cleared: `avx2` clears AVX-512, VNNI, AVX-VNNI, AMX and BF16, so torch
and ONNX Runtime pick the kernels they run on most laptops (torch's own caps are set too);
`avx512-bf16` (CPUID_HIDE=zen4) clears only what AMD Zen 4 lacks (AMX, AVX512-FP16, AVX10,
AVX-VNNI); `avx512-vnni` (CPUID_HIDE=vnni) clears AVX512-BF16 as well: AVX-512 with VNNI and no
BF16, as on Intel Ice Lake, Cascade Lake and Tiger Lake (oneDNN capped at AVX512_CORE_VNNI too).
Needs x86-64 Linux with `cpuid_fault` in /proc/cpuinfo. The cores, caches and clocks stay this
machine's: an emulated Zen 4 is this CPU without AMX, not a Zen 4, and an emulated Ice Lake is
this CPU without BF16, not an Ice Lake.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.common import BenchError, cpu_name
from embed_server.hardware import cpu_class, cpu_features

AVX2_CAP = {
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    # glibc chose its string functions before the preloaded library hides AVX-512
    "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD",
}
# Emulated CPU classes: the environment of the process that runs as one
EMULATIONS = {
    "avx2": AVX2_CAP,
    "avx512-bf16": {"CPUID_HIDE": "zen4"},
    "avx512-vnni": {"CPUID_HIDE": "vnni", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"},
}
SHIM = Path(__file__).resolve().parent / "avx2_only.c"


def emulating() -> str | None:
    """The class emulated in this process (the CPUID shim preloaded), or None."""
    if SHIM.stem not in os.environ.get("LD_PRELOAD", ""):
        return None
    hide = os.environ.get("CPUID_HIDE")
    return {"zen4": "avx512-bf16", "vnni": "avx512-vnni"}.get(hide or "", "avx2")


def build_shim() -> Path:
    """bench/research/avx2_only.c compiled into the temporary folder (once per source version)."""
    if platform.machine().lower() not in {"x86_64", "amd64"} or not Path("/proc").exists():
        raise BenchError("--emulate needs Linux on x86-64")
    flags = Path("/proc/cpuinfo").read_text().split()
    if "cpuid_fault" not in flags:
        raise BenchError("--emulate: this CPU or kernel has no CPUID faulting (cpuid_fault)")
    if shutil.which("gcc") is None:
        raise BenchError(
            "--emulate builds bench/research/avx2_only.c with gcc: gcc is not installed"
        )
    digest = hashlib.sha256(SHIM.read_bytes()).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"avx2_only-{digest}.so"
    if not target.exists():
        partial = target.with_suffix(f".{os.getpid()}.so")
        subprocess.run(
            ["gcc", "-O2", "-shared", "-fPIC", "-o", str(partial), str(SHIM)], check=True
        )
        partial.replace(target)
    return target


def cpu_line() -> str:
    """The detected CPU class, and whether it is this CPU's or emulated."""
    klass = cpu_class(cpu_features())
    emulated = emulating()
    if emulated is None:
        return f"CPU class: {klass} on {cpu_name()} (native)"
    if emulated == "avx512-bf16":
        hidden = "no AMX, AVX512-FP16, AVX10 or AVX-VNNI (AVX-512, VNNI and BF16 kept)"
        like = "as on an AMD Zen 4, but with this machine's cores, caches and clocks"
    elif emulated == "avx512-vnni":
        hidden = (
            "no AVX512-BF16, AMX, AVX512-FP16, AVX10 or AVX-VNNI (AVX-512 and VNNI kept; "
            "oneDNN capped at AVX512_CORE_VNNI)"
        )
        like = "as on an Intel Ice Lake, but with this machine's cores, caches and clocks"
    else:
        hidden = "no AVX-512, VNNI, AVX-VNNI, AMX or BF16"
        like = "cores, caches and clocks are this machine's"
    return (
        f"CPU class: {klass}, emulated: CPUID shows {hidden} to any engine "
        f"(bench/research/avx2_only.c); {like} ({cpu_name()})"
    )


def rerun_emulated(script: str, argv: Sequence[str], klass: str) -> int:
    """Run `script` with `argv` again in a fresh process that sees a CPU of class `klass`
    (CPUID is read when each library loads); its exit status."""
    shim = build_shim()
    preload = " ".join(filter(None, [str(shim), os.environ.get("LD_PRELOAD", "")]))
    env = {**os.environ, **EMULATIONS[klass], "LD_PRELOAD": preload}
    return subprocess.run([sys.executable, script, *argv], env=env, check=False).returncode
