"""`--emulate-avx2` (bench/embed_throughput.py): measure as on an AVX2-only CPU, on this one.

bench/avx2_only.c, compiled with gcc and preloaded, turns on Linux's CPUID faulting and answers
CPUID with AVX-512, VNNI, AVX-VNNI, AMX and BF16 cleared, so torch and ONNX Runtime pick the
kernels they run on most laptops; torch's own caps are set too. Needs x86-64 Linux with
`cpuid_fault` in /proc/cpuinfo. The cores, caches and clocks stay this machine's.
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

from bench.common import BenchError
from embed_server.hardware import cpu_class, cpu_features

AVX2_CAP = {
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    # glibc chose its string functions before the preloaded library hides AVX-512
    "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD",
}
SHIM = Path(__file__).resolve().parent / "avx2_only.c"


def emulating() -> bool:
    """True in the process --emulate-avx2 started (the CPUID shim preloaded)."""
    return SHIM.stem in os.environ.get("LD_PRELOAD", "")


def build_shim() -> Path:
    """bench/avx2_only.c compiled into the temporary folder (once per source version)."""
    if platform.machine().lower() not in {"x86_64", "amd64"} or not Path("/proc").exists():
        raise BenchError("--emulate-avx2 needs Linux on x86-64")
    flags = Path("/proc/cpuinfo").read_text().split()
    if "cpuid_fault" not in flags:
        raise BenchError("--emulate-avx2: this CPU or kernel has no CPUID faulting (cpuid_fault)")
    if shutil.which("gcc") is None:
        raise BenchError("--emulate-avx2 builds bench/avx2_only.c with gcc: gcc is not installed")
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
    if not emulating():
        return f"CPU class: {klass} (native)"
    return (
        f"CPU class: {klass}, emulated: CPUID shows no AVX-512, VNNI, AVX-VNNI, AMX or BF16 to "
        "any engine (bench/avx2_only.c); cores, caches and clocks are this machine's"
    )


def rerun_emulated(script: str, argv: Sequence[str]) -> int:
    """Run `script` with `argv` again in a fresh process that sees an AVX2-only CPU (CPUID is
    read when each library loads); its exit status."""
    shim = build_shim()
    preload = " ".join(filter(None, [str(shim), os.environ.get("LD_PRELOAD", "")]))
    env = {**os.environ, **AVX2_CAP, "LD_PRELOAD": preload}
    return subprocess.run([sys.executable, script, *argv], env=env, check=False).returncode
