"""Does boosting the notes that the top hits link to improve retrieval? Measured, not shipped.

    uv run bench/graph_boost.py [--cache DIR] [--json]

For each development collection with links between its notes (the vault, the manual; Cranfield,
the notes corpus and the code have none), every query is searched once in hybrid mode, 30
candidates deep, one per note, as kb.search.search's first stage does. The candidates are then
re-ranked, side by side in this one run, by score + w * sum(1 / rank of each of the top `m` hits
that links to the candidate) for each (w, m) of the grid, and scored like bench/retrieval.py
(nDCG@10 per kind of query). A note linked from a top hit is only moved up within the
candidates: the boost reorders, it fetches nothing. The links are the ones ingest stores
(payload `links`, kb.ingest.prepare). The results and the decision are in
bench/results/graph-boost.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import BenchError, bench_settings, copy_notes, describe, embedder, format_table
from bench.corpora import COLLECTIONS, Collection
from bench.retrieval import Cache, Query, average, load_queries, score
from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.core.schema import Hit
from kb.search.query import search

DEPTH = 30  # candidates re-ranked: kb.search.search reads this many for its reranker
K = 10
WEIGHTS = (0.02, 0.05, 0.1, 0.2)
TOPS = (1, 3, 5)
LINKED = ("vault", "manual")  # the collections whose notes link to each other


def boosted(hits: Sequence[Hit], links: dict[str, list[str]], weight: float, top: int) -> list[str]:
    """The candidates' sources re-ranked by the boost (see the module doc)."""
    bonus: dict[str, float] = {}
    for rank, hit in enumerate(hits[:top], 1):
        for target in links.get(hit.source or "", []):
            bonus[target] = bonus.get(target, 0.0) + weight / rank
    order = sorted(hits, key=lambda h: -(h.score + bonus.get(h.source or "", 0.0)))
    return list(dict.fromkeys(h.source for h in order if h.source))[:K]


def measure(corpus: Collection, embed_url: str, cache: Path | None) -> dict[str, dict[str, float]]:
    """nDCG@10 per kind for plain hybrid and each boost of the grid."""
    queries: list[Query] = load_queries(corpus.queries, corpus.docs)
    with tempfile.TemporaryDirectory(prefix="kb-bench-graph-") as tmp:
        notes = Path(tmp) / "notes"
        copy_notes(corpus.docs, notes)
        settings = bench_settings(notes, Path(tmp) / "qdrant", embed_url)
        kept = Cache(cache)
        kept.restore(settings.STATE_DIR)
        with open_store(settings) as store, embed_client(settings) as client:
            summary = run(settings, client, store)
            kept.keep(settings.STATE_DIR)
            if summary.failed:
                raise BenchError(f"{corpus.name}: {len(summary.failed)} files failed to ingest")
            stored = store.notes(["links"])
            links = {str(p["source"]): list(p.get("links") or []) for p in stored}
            print(f"{corpus.name}: {sum(map(len, links.values()))} links stored", file=sys.stderr)
            ranked = [search(store, client, q.text, DEPTH, mode="hybrid") for q in queries]
    rows: dict[str, list[dict[str, float]]] = {"hybrid": []}
    for hits, q in zip(ranked, queries, strict=True):
        plain = list(dict.fromkeys(h.source for h in hits if h.source))[:K]
        rows["hybrid"].append(score(plain, q.relevant))
        for weight in WEIGHTS:
            for top in TOPS:
                label = f"boost w={weight:g} top={top}"
                ranks = boosted(hits, links, weight, top)
                rows.setdefault(label, []).append(score(ranks, q.relevant))
    groups: dict[str, list[int]] = {"all": list(range(len(queries)))}
    for i, q in enumerate(queries):
        if q.kind:
            groups.setdefault(q.kind, []).append(i)
    return {
        label: {g: average([r[i] for i in idx])["ndcg@10"] for g, idx in groups.items()}
        for label, r in rows.items()
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, help="keep the embedding cache in this folder")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON last")
    args = parser.parse_args(argv)
    corpora = [c for c in COLLECTIONS if c.name in LINKED]
    try:
        with embedder() as url:
            results = {c.name: measure(c, url, args.cache) for c in corpora}
    except BenchError as exc:
        print(f"error: {describe(exc)}", file=sys.stderr)
        return 1
    for name, table in results.items():
        kinds = list(next(iter(table.values())))
        rows = [[label, *(f"{table[label][k]:.3f}" for k in kinds)] for label in table]
        print(f"\n{name}: nDCG@10, hybrid {DEPTH} candidates re-ranked")
        print(format_table(["pipeline", *kinds], rows))
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
