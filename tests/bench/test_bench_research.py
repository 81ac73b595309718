"""The research scripts of bench/research/ still start and print their JSON (tiny sizes: a smoke
test, not a measurement). Marked `research`: CI leaves them out (`-m "not research"`), as it leaves
out the scripts; run them with `pytest -m research` after changing what they use."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from helpers import REPO_ROOT
from test_bench_rerank_smoke import run

pytestmark = pytest.mark.research

RESEARCH = REPO_ROOT / "bench" / "research"


def test_rerank_fidelity_bench_compares_settings_with_fp32_on_cranfield() -> None:
    out, result = run(str(RESEARCH / "rerank_fidelity.py"), "--quick", "--queries=1", "--json")
    assert result["reference"] == "fp32 512t" and result["queries"] == 1
    int8, cut = result["settings"]["int8 512t"], result["settings"]["int8 256t"]
    assert 0.0 < int8["spearman_mean"] <= 1.0 and 0.0 <= int8["top5_overlap"] <= 1.0
    assert int8["pearson_logits"] < 1.0  # int8 moves the logits; fp32 vs itself would be 1
    assert cut["cut"] >= int8["cut"]  # a lower token limit cuts at least as many pairs
    assert "spearman mean" in out


GPU_CHECK_ON_CPU = ["--device=cpu", "--layers=1", "--chunks=3", "--repeats=1", "--json"]


@pytest.mark.slow  # builds a one-layer Qwen3 shape and three embedders: ~45 s
def test_gpu_check_runs_its_steps_on_the_cpu_and_fails_exactly_when_it_names_a_regression() -> None:
    proc = subprocess.run(
        [sys.executable, str(RESEARCH / "gpu_check.py"), *GPU_CHECK_ON_CPU],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["default"].endswith(" on cpu")  # the shipped default, where it was asked
    assert result["baseline_chunks_per_s"] > 0 and result["default_chunks_per_s"] > 0
    assert 0 < result["query_p50_p95_s"][0] <= result["query_p50_p95_s"][1]
    assert result["search"]["tokens"] > result["search"]["instruction_tokens_reused"] > 0
    assert -1 <= result["min_cosine_vs_cpu_fp32"] <= 1 + 1e-6
    assert (proc.returncode == 1) == bool(result["regressions"])


def test_gpu_check_without_a_gpu_says_so_in_one_line() -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is here: the check would run")
    proc = subprocess.run(
        [sys.executable, str(RESEARCH / "gpu_check.py")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "error: torch sees no CUDA GPU (--device cpu runs the steps here)"
    )
