"""bench/retrieval.py's regression gate: the baseline a run keeps (nDCG@10 per collection and
pipeline, with the model and precision), read back and compared within GATE_TOLERANCE."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.common import BenchError
from bench.retrieval_eval import pipelines

GATE_TOLERANCE = 0.01  # the largest nDCG@10 drop the gate lets through


def baseline_of(summary: dict[str, Any]) -> dict[str, Any]:
    """What the gate keeps of a run: the model and its precision, and each collection's nDCG@10
    in the three modes and the reference (not in the rows --fusion adds)."""
    gated = [row.label for row in pipelines(reference=True)]
    return {
        "model": summary["model"],
        "precision": summary["precision"],
        "tolerance": GATE_TOLERANCE,
        "ndcg@10": {
            name: {p: v["all"]["ndcg@10"] for p, v in c["metrics"].items() if p in gated}
            for name, c in summary["collections"].items()
        },
    }


def regressions(baseline: dict[str, Any], summary: dict[str, Any]) -> list[str]:
    """One line per collection and pipeline whose nDCG@10 fell by more than the baseline's
    tolerance, or that the run did not measure; empty when the gate passes."""
    ours = (summary["model"], summary["precision"])
    theirs = (baseline.get("model"), baseline.get("precision"))
    if theirs != ours:
        return [
            f"the baseline was measured with {' '.join(map(str, theirs))}, this run used "
            f"{' '.join(ours)}: compare like with like (run without EMBED_URL)"
        ]
    tolerance = float(baseline.get("tolerance", GATE_TOLERANCE))
    found: list[str] = []
    for name, by_pipeline in baseline["ndcg@10"].items():
        measured = summary["collections"].get(name, {}).get("metrics", {})
        for pipeline, before in by_pipeline.items():
            if pipeline not in measured:
                found.append(f"{name} {pipeline}: not measured by this run")
                continue
            now = measured[pipeline]["all"]["ndcg@10"]
            if now < before - tolerance:
                found.append(
                    f"{name} {pipeline}: nDCG@10 {before:.4f} -> {now:.4f} "
                    f"({now - before:+.4f}, more than {tolerance} down)"
                )
    return found


def read_baseline(path: Path) -> dict[str, Any]:
    try:
        baseline = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BenchError(f"--baseline {path}: cannot read it ({exc})") from None
    if not isinstance(baseline, dict) or not isinstance(baseline.get("ndcg@10"), dict):
        raise BenchError(f"--baseline {path}: no 'ndcg@10' table (write one with --write-baseline)")
    return baseline
