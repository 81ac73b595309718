"""`bench/embed_throughput.py --emulate avx2|avx512-bf16|avx512-vnni` (bench/research/avx2.py)
measures every engine as on another CPU class: bench/research/avx2_only.c hides AVX-512, VNNI, AMX
and BF16 from CPUID for the whole process, with CPUID_HIDE=zen4 only what AMD Zen 4 lacks (AMX and
later), with CPUID_HIDE=vnni that and AVX512-BF16 (Ice Lake's class). Research (`-m research`):
CI does not run it."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.research import avx2

pytestmark = pytest.mark.research


def can_fault_cpuid() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    return (
        platform.machine() == "x86_64"
        and cpuinfo.exists()
        and "cpuid_fault" in cpuinfo.read_text().split()
        and shutil.which("gcc") is not None
    )


# Reads torch's own CPU detection and the embedder's class for it, in a fresh process.
PROBE = """
import torch
from embed_server.hardware import cpu_class, cpu_features
print(torch.backends.cpu.get_cpu_capability(), torch.cpu._is_avx512_bf16_supported(),
      cpu_class(cpu_features()))
"""


def probe(env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.split()


@pytest.mark.skipif(not can_fault_cpuid(), reason="needs x86-64 Linux with CPUID faulting and gcc")
def test_the_avx2_shim_makes_torch_and_the_cpu_class_see_an_avx2_only_cpu() -> None:
    env = {k: v for k, v in os.environ.items() if k not in avx2.AVX2_CAP}
    native = probe(env)
    shim = avx2.build_shim()
    assert probe({**env, "LD_PRELOAD": str(shim)}) == ["AVX2", "False", "avx2"]
    # The shim hides, it never adds: an AVX2-only machine reads the same with or without it.
    if native[0] == "AVX2":
        assert native == ["AVX2", "False", "avx2"]


def has_avx512_bf16() -> bool:
    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else []
    return "avx512_bf16" in flags and "avx512_vnni" in flags


@pytest.mark.skipif(
    not (can_fault_cpuid() and has_avx512_bf16()),
    reason="needs x86-64 Linux with CPUID faulting, gcc and a CPU with AVX512-BF16 and VNNI",
)
def test_the_zen4_shim_hides_amx_and_keeps_avx512_bf16_so_the_class_is_avx512_bf16() -> None:
    env = {k: v for k, v in os.environ.items() if k not in avx2.AVX2_CAP}
    shim = avx2.build_shim()
    seen = probe({**env, **avx2.EMULATIONS["avx512-bf16"], "LD_PRELOAD": str(shim)})
    assert seen == ["AVX512", "True", "avx512-bf16"]


# What oneDNN (torch's bf16 and int8 kernels) says it runs, in a fresh process
ONEDNN_PROBE = """
import torch
x = torch.ones(64, 64, dtype=torch.bfloat16)  # small ones skip oneDNN
torch.nn.functional.linear(x, x)
"""


@pytest.mark.skipif(
    not (can_fault_cpuid() and has_avx512_bf16()),
    reason="needs x86-64 Linux with CPUID faulting, gcc and a CPU with AVX512-BF16 and VNNI",
)
def test_the_vnni_shim_hides_avx512_bf16_and_keeps_vnni_so_the_class_is_avx512_vnni() -> None:
    env = {k: v for k, v in os.environ.items() if k not in avx2.AVX2_CAP}
    emulated = {**env, **avx2.EMULATIONS["avx512-vnni"], "LD_PRELOAD": str(avx2.build_shim())}
    assert probe(emulated) == ["AVX512", "False", "avx512-vnni"]
    verbose = subprocess.run(
        [sys.executable, "-c", ONEDNN_PROBE],
        env={**emulated, "ONEDNN_VERBOSE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    isa = next(line for line in verbose.splitlines() if ",isa:" in line)
    assert "DL Boost" in isa  # VNNI kept
    assert "bfloat16" not in isa  # and bf16 computed as on Ice Lake: converted, not native


def test_the_cpu_line_says_when_the_class_is_emulated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/tmp/avx2_only-0123.so")
    assert "emulated: CPUID shows no AVX-512" in avx2.cpu_line()
    monkeypatch.setenv("CPUID_HIDE", "zen4")
    assert "emulated: CPUID shows no AMX" in avx2.cpu_line()
    assert "as on an AMD Zen 4, but with this machine's cores" in avx2.cpu_line()
    monkeypatch.setenv("CPUID_HIDE", "vnni")
    assert avx2.emulating() == "avx512-vnni"
    assert "emulated: CPUID shows no AVX512-BF16" in avx2.cpu_line()
    monkeypatch.delenv("LD_PRELOAD")
    assert avx2.cpu_line().endswith("(native)")
