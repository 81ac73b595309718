"""bench/retrieval.py's judged queries and metrics: the queries file read and checked (one JSON
object a line, relevant paths resolved against DOCS_DIR), and R@5, R@10, MRR@10, nDCG@10."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common import BenchError
from kb.content.formats import KNOWN, is_secret

K = 10
CUTOFFS = (5, 10)
METRICS = ("r@5", "r@10", "mrr@10", "ndcg@10")


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    relevant: dict[str, float]  # source (relative to DOCS_DIR) -> grade
    kind: str | None


# --- queries -----------------------------------------------------------------------------


def _is_note(path: Path) -> bool:
    return path.name.lower().endswith(KNOWN) and not is_secret(path.name)


def _source_of(rel: str, docs_dir: Path, queries_dir: Path) -> str | None:
    """The source (path relative to DOCS_DIR) a judged path names, or None if it names no note
    file in DOCS_DIR."""
    for base in (docs_dir, queries_dir):
        path = (base / rel).resolve()
        if path.is_file() and path.is_relative_to(docs_dir) and _is_note(path):
            return path.relative_to(docs_dir).as_posix()
    return None


def load_queries(path: Path, docs_dir: Path, *, no_match: bool = False) -> list[Query]:
    """Parse and check the queries file; BenchError names the line and field at fault.
    `no_match`: queries with no relevant document (`"relevant": {}`, bench/no_match.py)."""
    docs_dir = docs_dir.resolve()
    queries_dir = path.resolve().parent
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"cannot read {path}: {exc}") from None
    queries: list[Query] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise BenchError(f"{where}: expected a JSON object")
        qid, text, relevant, kind = (obj.get(f) for f in ("id", "query", "relevant", "kind"))
        if not isinstance(qid, str) or not qid or qid in seen:
            raise BenchError(f"{where}: 'id' must be a unique non-empty string")
        seen.add(qid)
        if not isinstance(text, str) or not text.strip():
            raise BenchError(f"{where}: 'query' must be a non-empty string")
        if kind is not None and (not isinstance(kind, str) or not kind or kind == "all"):
            raise BenchError(f"{where}: 'kind' must be a non-empty string other than 'all'")
        if no_match and relevant != {}:
            raise BenchError(f"{where}: a no-match query has 'relevant': {{}}")
        if not isinstance(relevant, dict) or not (relevant or no_match):
            raise BenchError(f"{where}: 'relevant' must be a non-empty object of path: grade")
        judged: dict[str, float] = {}
        for rel, grade in relevant.items():
            if isinstance(grade, bool) or not isinstance(grade, int | float) or grade <= 0:
                raise BenchError(f"{where}: grade of {rel!r} must be a positive number")
            source = _source_of(rel, docs_dir, queries_dir)
            if source is None:
                raise BenchError(
                    f"{where}: relevant file {rel!r} is not an indexed file in {docs_dir}, "
                    f"read relative to it or to {queries_dir}"
                )
            judged[source] = float(grade)
        queries.append(Query(qid, text, judged, kind))
    if not queries:
        raise BenchError(f"{path}: no queries")
    return queries


# --- metrics -----------------------------------------------------------------------------


def score(ranked: Sequence[str], relevant: dict[str, float]) -> dict[str, float]:
    """R@5, R@10, MRR@10 and nDCG@10 (linear gains) of one ranked list of distinct sources."""
    top = list(ranked[:K])
    out = {f"r@{c}": sum(s in relevant for s in top[:c]) / len(relevant) for c in CUTOFFS}
    first = next((rank for rank, s in enumerate(top, 1) if s in relevant), None)
    out["mrr@10"] = 1.0 / first if first else 0.0
    dcg = sum(relevant.get(s, 0.0) / math.log2(rank + 1) for rank, s in enumerate(top, 1))
    ideal = sorted(relevant.values(), reverse=True)[:K]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, 1))
    out["ndcg@10"] = dcg / idcg
    return out


def average(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    return {m: round(sum(r[m] for r in rows) / len(rows), 4) for m in METRICS}
