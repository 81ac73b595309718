"""The CPU classes `auto` knows, read from /proc/cpuinfo flag sets recorded on real machines, and
the one class whose engine is fixed by the table rather than measured (issue 50)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from embed_server import hardware

CPU = torch.device("cpu")
COMMON = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse "
    "sse2 ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid "
    "pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand "
    "hypervisor lahf_lm abm 3dnowprefetch fsgsbase bmi1 avx2 smep bmi2 erms invpcid rdseed adx "
    "smap clflushopt"
)
AVX512 = "avx512f avx512dq avx512cd avx512bw avx512vl"
# the flags line of /proc/cpuinfo on each machine, less the flags every one of them has
RECORDED = {
    "Ice Lake Xeon (Platinum 8375C)": f"{COMMON} {AVX512} avx512ifma clwb sha_ni xsaveopt xsavec "
    "xgetbv1 xsaves wbnoinvd ida arat avx512vbmi pku ospke avx512_vbmi2 gfni vaes vpclmulqdq "
    "avx512_vnni avx512_bitalg tme avx512_vpopcntdq rdpid md_clear flush_l1d arch_capabilities",
    "Cascade Lake Xeon (Platinum 8275CL)": f"{COMMON} mpx {AVX512} clwb xsaveopt xsavec xgetbv1 "
    "xsaves ida arat pku ospke avx512_vnni md_clear flush_l1d arch_capabilities",
    "Tiger Lake laptop (i7-1165G7)": f"{COMMON} {AVX512} avx512ifma clwb intel_pt sha_ni "
    "xsaveopt xsavec xgetbv1 xsaves avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq "
    "avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid movdiri movdir64b fsrm avx512_vp2intersect",
    "Skylake Xeon (Platinum 8175M)": f"{COMMON} mpx {AVX512} clwb xsaveopt xsavec xgetbv1 xsaves "
    "ida arat pku ospke",
    "Zen 3 EPYC (7R13)": f"{COMMON} mmxext fxsr_opt sse4a misalignsse topoext clwb sha_ni "
    "xsaveopt xsavec xgetbv1 clzero xsaveerptr rdpid vaes vpclmulqdq",
    "Zen 4 EPYC (family 25 model 17)": f"{COMMON} mmxext fxsr_opt sse4a {AVX512} avx512ifma clwb "
    "sha_ni xsaveopt xsavec xgetbv1 xsaves avx512_bf16 clzero arat avx512vbmi umip avx512_vbmi2 "
    "gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid fsrm",
    "Sapphire Rapids Xeon (Platinum 8488C)": f"{COMMON} {AVX512} avx512ifma clwb sha_ni "
    "avx_vnni avx512_bf16 avx512vbmi avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg "
    "avx512_vpopcntdq rdpid serialize tsxldtrk amx_bf16 avx512_fp16 amx_tile amx_int8",
}
CLASSES = {
    "Ice Lake Xeon (Platinum 8375C)": "avx512-vnni",
    "Cascade Lake Xeon (Platinum 8275CL)": "avx512-vnni",
    "Tiger Lake laptop (i7-1165G7)": "avx512-vnni",
    "Skylake Xeon (Platinum 8175M)": "avx2",  # AVX-512 without VNNI: int8 gains nothing there
    "Zen 3 EPYC (7R13)": "avx2",
    "Zen 4 EPYC (family 25 model 17)": "avx512-bf16",
    "Sapphire Rapids Xeon (Platinum 8488C)": "amx",
}


@pytest.mark.parametrize("machine", sorted(RECORDED))
def test_each_recorded_cpu_is_read_as_its_class(machine: str) -> None:
    assert hardware.cpu_class(set(RECORDED[machine].split()), "x86_64") == CLASSES[machine]


def test_avx512_vnni_without_bf16_runs_torch_int8_by_the_table_never_by_measuring() -> None:
    assert hardware.resolve_engine("auto", "auto", CPU, "avx512-vnni") == ("torch", "int8")
    on = SimpleNamespace(EMBED_AUTO_MEASURE=True, EMBED_BACKEND="auto", EMBED_DTYPE="auto")
    assert not hardware.measures(on, CPU, "avx512-vnni")  # measuring flipped with load there
    assert hardware.measures(on, CPU, "avx2") and hardware.measures(on, CPU, "avx512-bf16")
    assert hardware.resolve_rerank_dtype("auto", CPU, "avx512-vnni") == "fp32"


def test_every_class_has_an_engine_and_a_rerank_precision() -> None:
    assert set(hardware.CPU_CLASSES) == set(hardware.RERANK_AUTO_DTYPE)
    assert set(CLASSES.values()) <= set(hardware.CPU_CLASSES)
