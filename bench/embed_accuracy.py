"""bench/embed_throughput.py's accuracy step: each candidate engine's vectors against torch
fp32's on real weights (MiniLM) over a judged collection (Cranfield's layout)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np

from bench.embed_engines import CANDIDATES, embed_all, label, load


def _ndcg10(ranked: list[str], relevant: dict[str, float]) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:10]))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum(grade / math.log2(rank + 2) for rank, grade in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def accuracy(model: Path, exports: Path, dataset: Path, n_docs: int) -> dict[str, dict[str, float]]:
    """Per candidate engine: lowest cosine to torch fp32 (docs and queries; one- and
    two-word inputs apart), nDCG@10 and agreement with its top 10.

    `dataset`: a folder with docs/*.md and, optionally, queries.jsonl (Cranfield's layout).
    """
    files = sorted((dataset / "docs").glob("*.md"), key=lambda f: (len(f.stem), f.stem))[:n_docs]
    if not files:
        raise SystemExit(f"error: no documents under {dataset / 'docs'}")
    names = [f"docs/{f.name}" for f in files]
    docs = [f.read_text(encoding="utf-8") for f in files]
    queries = []
    qfile = dataset / "queries.jsonl"
    if qfile.exists():
        for line in qfile.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            relevant = {k: v for k, v in item["relevant"].items() if k in set(names)}
            if relevant:
                queries.append((item["query"], relevant))
    # One- and two-word inputs: where per-tensor activation scales (int8) hurt most.
    heads = [q.split() for q, _ in queries] or [d.split() for d in docs]
    shorts = sorted({" ".join(h[:n]) for h in heads for n in (1, 2) if len(h) >= n})[:100]
    ref: dict[str, np.ndarray] = {}
    out: dict[str, dict[str, float]] = {}
    fp32 = load(model, CANDIDATES[0], exports)
    for candidate in CANDIDATES:
        embedder = fp32 if candidate == CANDIDATES[0] else load(model, candidate, exports)
        doc_vecs = embed_all(embedder, docs)
        texts = [fp32.prompt("query") + q for q, _ in queries]
        query_vecs = embed_all(embedder, texts) if texts else doc_vecs[:0]
        short_vecs = embed_all(embedder, shorts)
        top = [np.argsort(-(doc_vecs @ q))[:10] for q in query_vecs]
        if not ref:
            ref = {"docs": doc_vecs, "queries": query_vecs, "top": np.array(top)}
            ref["shorts"] = short_vecs
        cosines = np.concatenate(
            [np.sum(ref["docs"] * doc_vecs, 1), np.sum(ref["queries"] * query_vecs, 1)]
        )
        overlap = [len(set(t) & set(r)) / 10 for t, r in zip(top, ref["top"], strict=True)]
        ndcg = [_ndcg10([names[i] for i in t], r) for t, (_, r) in zip(top, queries, strict=True)]
        short_cosines = np.sum(ref["shorts"] * short_vecs, 1)
        out[label(candidate)] = {
            "min_cosine": float(cosines.min()),
            "min_cosine_short": float(short_cosines.min()),
            "ndcg10": statistics.fmean(ndcg) if ndcg else math.nan,
            "same_top10": sum(o == 1 for o in overlap) / len(overlap) if overlap else math.nan,
            "overlap_top10": statistics.fmean(overlap) if overlap else math.nan,
            "docs": len(docs),
            "queries": len(queries),
            "shorts": len(shorts),
        }
    return out
