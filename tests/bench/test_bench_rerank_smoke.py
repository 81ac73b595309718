"""bench/rerank.py and bench/retrieval.py --rerank still run end to end and print their JSON
(tiny sizes and the tiny fixture reranker: smoke tests, not measurements)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO_ROOT
from test_bench_smoke import tiny_dataset

BENCH = REPO_ROOT / "bench"


def run(*args: str, env: dict[str, str] | None = None) -> tuple[str, dict]:
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout, json.loads(proc.stdout.strip().splitlines()[-1])


def test_rerank_bench_measures_the_shipped_default_beside_the_levers() -> None:
    tiny, l6 = "cross-encoder/ms-marco-TinyBERT-L2-v2", "cross-encoder/ms-marco-MiniLM-L6-v2"
    out, result = run(
        str(BENCH / "rerank.py"),
        "--quick",
        "--json",
        f"--models={tiny},{l6}",
        "--sizes=4,30",
        "--passage-tokens=6",
        "--repeats=1",
    )
    # the --json figure is the configuration a fresh install runs: the settings' defaults, with
    # RERANK_DTYPE=auto as it resolves on this machine's CPU class (bf16 on AMX, else fp32)
    import torch

    from embed_server import hardware

    dtype = hardware.resolve_rerank_dtype("auto", torch.device("cpu"))
    assert dtype == hardware.RERANK_AUTO_DTYPE[hardware.cpu_class(hardware.cpu_features())]
    assert result["default"] == {"model": tiny, "dtype": dtype, "max_tokens": 512, "threads": 0}
    assert result["default_model"] == tiny and result["added_p50_ms_30"] > 0
    assert "CPU: " in out and "passages p50 / p95 ms" in out and "<- shipped default" in out
    rows = result["latency_s"]
    assert {"ms-marco-MiniLM-L6-v2 fp32 512t", "ms-marco-MiniLM-L6-v2 int8 512t"} <= set(rows)
    assert rows[f"ms-marco-TinyBERT-L2-v2 {dtype} 512t"]["30"]["runs"] == 1
    assert rows["ms-marco-MiniLM-L6-v2 int8 512t"]["4"]["p50"] > 0


def test_retrieval_bench_compares_reranked_rows_through_the_embedders_reranker(
    rerank_url: str, tmp_path: Path
) -> None:
    data = tiny_dataset(tmp_path / "data")
    env = {**os.environ, "EMBED_URL": rerank_url}
    out, metrics = run(
        str(BENCH / "retrieval.py"),
        str(data / "docs"),
        str(data / "queries.jsonl"),
        "--rerank",
        "--rerank-weights=1,0",
        "--json",
        env=env,
    )
    assert {"hybrid", "hybrid+rerank w=1", "hybrid+rerank w=0"} <= set(metrics)
    # weight 0 keeps the first stage's order: the same quality as hybrid, by construction
    assert metrics["hybrid+rerank w=0"]["all"] == metrics["hybrid"]["all"]
    assert "hybrid+rerank w=1" in out


def test_retrieval_bench_refuses_rerank_without_a_reranker(embedder_url: str, tmp_path) -> None:
    data = tiny_dataset(tmp_path / "data")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "retrieval.py"), str(data / "docs"),
         str(data / "queries.jsonl"), "--rerank"],
        cwd=REPO_ROOT, env={**os.environ, "EMBED_URL": embedder_url},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1 and "RERANK_MODEL" in proc.stderr
