"""Fusions compared on the same candidates, ranked by their worst collection.

    uv run bench/fusion_sweep.py [--cache DIR] [--only NAME] [--json]

Every development collection (bench/corpora.py) is ingested once and each query's two rankings
are read from Qdrant once: the dense and the keyword prefetch hybrid search fuses, as deep as
it asks for (kb.store.query.grouped_depth). They are then merged offline by each fusion family
and parameter — reciprocal rank fusion plain and weighted, Qdrant's distribution-based score
fusion (DBSF), min-max normalised sums, the bonus formula hybrid search uses and other shapes of
it, and a per-query choice by how strongly the keywords match — and scored as
bench/retrieval.py scores (k=10, a file by its best chunk).

A fusion's *margin* in a cell (a collection, or one kind of its queries) is its nDCG@10 minus the
best of keyword, semantic and plain RRF there; it is ranked by its worst margin over every cell,
then by its mean nDCG@10. Plain RRF, the reference, is measured through Qdrant (as
bench/retrieval.py measures it): its scores tie often (first in one ranking only, first in the
other only) and the engine orders ties its own way, which a replay cannot follow. The replay is
checked against the real pipeline: the bonus formula replayed and hybrid search through Qdrant
are printed side by side, and the run fails if they differ.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import STOPS, bench_settings, copy_notes, describe, embedder, format_table
from bench.corpora import Collection, dev_collections
from bench.retrieval import Cache, K, Query, load_queries, score
from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.embedding.client import EmbedClient
from kb.embedding.keywords import is_lookup, query_vector
from kb.search.query import search
from kb.store.points import Store
from kb.store.query import (
    HYBRID_FUSION,
    KEYWORD_HALF,
    KEYWORD_WEIGHT,
    LOOKUP_WEIGHT,
    Fusion,
    grouped_depth,
)

DEPTH = grouped_depth(K, 1)  # each prefetch's limit in a k=10, one-per-note hybrid search
Scored = list[tuple[str, str, float]]  # (chunk key, source, score), best first


@dataclass
class Candidates:
    query: Query
    terms: int  # distinct keyword terms of the query
    dense: Scored
    keyword: Scored


Fuse = Callable[[Candidates], dict[str, float]]  # chunk key -> fused score


# --- fusion families -----------------------------------------------------------------------


def _scores(ranked: Scored) -> dict[str, float]:
    return {key: s for key, _, s in ranked}


def single(which: str) -> Fuse:
    return lambda c: _scores(c.dense if which == "semantic" else c.keyword or c.dense)


def rrf(k: int = 60, keyword_weight: float = 1.0) -> Fuse:
    """sum of w / (k + rank); a point missing from a ranking gets nothing from it."""

    def fuse(c: Candidates) -> dict[str, float]:
        out: dict[str, float] = {}
        for weight, ranked in ((1.0, c.dense), (keyword_weight, c.keyword)):
            for rank, (key, _, _) in enumerate(ranked, 1):
                out[key] = out.get(key, 0.0) + weight / (k + rank)
        return out

    return fuse


def _normalised(ranked: Scored, how: str) -> dict[str, float]:
    values = [s for _, _, s in ranked]
    if how == "minmax":
        low, high = min(values), max(values)
    else:  # dbsf: mean +- 3 standard deviations (sample), as Qdrant's
        mean = statistics.fmean(values)
        spread = 3 * statistics.stdev(values) if len(values) > 1 else 0.0
        low, high = mean - spread, mean + spread
    return {key: (s - low) / (high - low) if high > low else 0.5 for key, _, s in ranked}


def normalised(how: str, dense_weight: float = 0.5) -> Fuse:
    def fuse(c: Candidates) -> dict[str, float]:
        if not c.keyword:
            return _scores(c.dense)
        dense, keyword = _normalised(c.dense, how), _normalised(c.keyword, how)
        return {
            key: dense_weight * dense.get(key, 0.0) + (1 - dense_weight) * keyword.get(key, 0.0)
            for key in dense.keys() | keyword.keys()
        }

    return fuse


def bonus(
    weight: float = KEYWORD_WEIGHT,
    half: float = KEYWORD_HALF,
    power: int = 1,
    lookup: float = LOOKUP_WEIGHT,
) -> Fuse:
    """cosine + w * (S / (S + half * terms)) ** power, w = `lookup` for a lookup query
    (kb.embedding.keywords.is_lookup), else `weight`: kb.store.query.fusion at power 1."""

    def fuse(c: Candidates) -> dict[str, float]:
        dense, keyword = _scores(c.dense), _scores(c.keyword)
        norm = half * max(c.terms, 1)
        w = lookup if is_lookup(c.query.text) else weight
        out = {}
        for key in dense.keys() | keyword.keys():
            bm25 = keyword.get(key, 0.0)
            out[key] = dense.get(key, 0.0) + w * (bm25 / (bm25 + norm)) ** power
        return out

    return fuse


def best_of_each(
    weight: float = KEYWORD_WEIGHT, half: float = KEYWORD_HALF, lookup: float = LOOKUP_WEIGHT
) -> Fuse:
    """The bonus formula's halves taken per note: a note scores its best cosine plus its best
    keyword bonus, each from any of its chunks (hybrid search since issue 51:
    kb.store.engine.best_per_note). Replayed as each chunk's cosine plus its note's best bonus,
    whose best chunk is the note's score."""

    def fuse(c: Candidates) -> dict[str, float]:
        dense, keyword = _scores(c.dense), _scores(c.keyword)
        sources = {key: source for key, source, _ in (*c.dense, *c.keyword)}
        norm = half * max(c.terms, 1)
        w = lookup if is_lookup(c.query.text) else weight
        words: dict[str, float] = {}
        for key, bm25 in keyword.items():
            note = sources[key]
            words[note] = max(words.get(note, 0.0), w * bm25 / (bm25 + norm))
        return {key: dense.get(key, 0.0) + words.get(note, 0.0) for key, note in sources.items()}

    return fuse


def with_rrf(share: float, k: int = 60, half: float = KEYWORD_HALF) -> Fuse:
    """The bonus formula plus `share` x plain RRF's score: a small reward for ranking high on
    both sides (issue 51: plain RRF finds a few more of the manual's paraphrases' pages)."""
    scored, ranks = bonus(half=half), rrf(k)

    def fuse(c: Candidates) -> dict[str, float]:
        b, r = scored(c), ranks(c)
        return {key: b.get(key, 0.0) + share * r.get(key, 0.0) for key in b.keys() | r.keys()}

    return fuse


def choice(low: float, high: float) -> Fuse:
    """Per query, by the best keyword match's BM25 per query term: below `low` the keywords
    hardly match (a paraphrase) and only nudge the dense ranking (weight 0.3); from `high` on
    they match strongly (an identifier, a name) and weigh double; in between, the bonus."""
    soft, mid, hard = bonus(0.3), bonus(), bonus(2.0)

    def fuse(c: Candidates) -> dict[str, float]:
        strength = c.keyword[0][2] / max(c.terms, 1) if c.keyword else 0.0
        return (soft if strength < low else hard if strength >= high else mid)(c)

    return fuse


def agreement(lam: float, lookup: float = LOOKUP_WEIGHT) -> Fuse:
    """cosine + w * bonus * (1 + lam * cosine): a keyword match counts a little more in a chunk
    that is close in meaning too; w = `lookup` for a lookup query, else 1."""

    def fuse(c: Candidates) -> dict[str, float]:
        dense, keyword = _scores(c.dense), _scores(c.keyword)
        norm = KEYWORD_HALF * max(c.terms, 1)
        weight = lookup if is_lookup(c.query.text) else 1.0
        out = {}
        for key in dense.keys() | keyword.keys():
            cosine, bm25 = dense.get(key, 0.0), keyword.get(key, 0.0)
            out[key] = cosine + weight * bm25 / (bm25 + norm) * (1 + lam * cosine)
        return out

    return fuse


def families() -> dict[str, Fuse]:
    found: dict[str, Fuse] = {"keyword": single("keyword"), "semantic": single("semantic")}
    found["rrf k=60 (replayed: ties in dense order)"] = rrf(60)
    for k in (10, 30):
        found[f"rrf k={k}"] = rrf(k)
    for w in (0.5, 1.5, 2.0):
        found[f"rrf k=60 keyword x{w:g}"] = rrf(60, w)
    found["dbsf"] = normalised("dbsf")
    for d in (0.3, 0.5, 0.7):
        found[f"minmax dense {d:g}"] = normalised("minmax", d)
    for w in (0.5, 1.0, 1.5):
        for h in (3.0, 6.0, 10.0):
            found[f"bonus w={w:g} half={h:g} lookups x{LOOKUP_WEIGHT:g}"] = bonus(w, h)
    found["bonus w=1 half=6, lookups x1 (the formula before)"] = bonus(lookup=1.0)
    found["note = best chunk (bonus w=1 half=6 lookups x2, before issue 51)"] = bonus()
    for w in (1.5, 3.0, 4.0, 8.0):
        found[f"bonus w=1 half=6 lookups x{w:g}"] = bonus(lookup=w)
    found["bonus squared w=1 half=3"] = bonus(1.0, 3.0, 2)
    for low, high in ((1.5, 4.0), (2.0, 3.5), (1.0, 5.0)):
        found[f"choice {low:g}/{high:g}"] = choice(low, high)
    for lam in (0.2, 0.3, 0.4):
        found[f"agreement {lam:g}"] = agreement(lam)
    for share, k, half in ((1.0, 60, 6.0), (1.25, 60, 6.0), (1.0, 30, 7.0), (3.0, 60, 8.0)):
        found[f"bonus half={half:g} + {share:g} x rrf k={k}"] = with_rrf(share, k, half)
    for half in (5.0, 5.5, 6.5, 7.0, 8.0):
        found[f"{BY_NOTE} half={half:g}"] = best_of_each(half=half)
    found[SHIPPED] = best_of_each()
    return found


BY_NOTE = "note = best cosine + best bonus"
SHIPPED = f"{BY_NOTE}, w={KEYWORD_WEIGHT:g} half={KEYWORD_HALF:g} lookups x{LOOKUP_WEIGHT:g}"
# measured through Qdrant, not replayed: hybrid search (the replay's check) and the reference
MEASURED: dict[str, Fusion] = {"hybrid search": HYBRID_FUSION, "rrf k=60 (Qdrant)": "rrf"}
REFERENCES = ("keyword", "semantic", "rrf k=60 (Qdrant)")


# --- candidates and scoring -------------------------------------------------------------------


@dataclass(frozen=True)
class Indexed:
    """A dev collection ingested into a throwaway store: where its queries go, and them."""

    store: Store  # the collection its queries search (the code one for a code collection)
    client: EmbedClient  # the embedder of that collection
    queries: list[Query]
    vectors: list[list[float]]  # the queries' embeddings


@contextmanager
def indexed(collection: Collection, url: str, cache: Path | None) -> Iterator[Indexed]:
    """`collection` ingested into a temporary store (its vectors from `cache` when kept there,
    kept there after), its queries embedded; the store is gone on exit."""
    queries = load_queries(collection.queries, collection.docs)
    with tempfile.TemporaryDirectory(prefix="kb-bench-indexed-") as tmp:
        notes = Path(tmp) / "notes"
        copy_notes(collection.docs, notes)
        settings = bench_settings(notes, Path(tmp) / "qdrant", url)
        kept = Cache(cache)
        kept.restore(settings.STATE_DIR)
        with (
            open_store(settings) as store,
            embed_client(settings) as prose,
            embed_client(settings, code=True) as code,
        ):
            run(settings, prose, store)
            kept.keep(settings.STATE_DIR)
            target, client = store, prose
            if collection.domain == "code":
                target, client = store.beside(settings.CODE_COLLECTION), code
            yield Indexed(target, client, queries, client.embed_queries([q.text for q in queries]))


def collect(
    collection: Collection, url: str, cache: Path | None
) -> tuple[list[Candidates], dict[str, dict[str, float]]]:
    """Each query's two prefetch rankings, and the nDCG@10 per group of hybrid search and of
    plain RRF through Qdrant (`MEASURED`)."""
    with indexed(collection, url, cache) as ix:
        target, client, queries, vectors = ix.store, ix.client, ix.queries, ix.vectors
        found: list[Candidates] = []
        real: dict[str, list[float]] = {name: [] for name in MEASURED}
        for q, dense in zip(queries, vectors, strict=True):
            keyword = query_vector(q.text)
            ranked = [
                [(f"{h.source}#{h.chunk_index}", str(h.source), h.score) for h in hits]
                for hits in (
                    target.query(DEPTH, dense=dense),
                    target.query(DEPTH, keyword=keyword) if keyword.indices else [],
                )
            ]
            found.append(Candidates(q, keyword.words or len(keyword.indices), *ranked))
            for name, fusion in MEASURED.items():
                hits = search(target, client, q.text, K, per_note=1, fusion=fusion)
                ranking = list(dict.fromkeys(str(h.source) for h in hits))
                real[name].append(score(ranking, q.relevant)["ndcg@10"])
    return found, {name: grouped(queries, values) for name, values in real.items()}


def grouped(queries: Sequence[Query], values: Sequence[float]) -> dict[str, float]:
    groups: dict[str, list[float]] = {"all": list(values)}
    for q, v in zip(queries, values, strict=True):
        if q.kind is not None:
            groups.setdefault(q.kind, []).append(v)
    return {g: round(sum(v) / len(v), 4) for g, v in groups.items()}


def replay(candidates: Sequence[Candidates], fuse: Fuse) -> dict[str, float]:
    values = []
    for c in candidates:
        sources = {key: source for key, source, _ in (*c.dense, *c.keyword)}
        fused = sorted(fuse(c).items(), key=lambda item: -item[1])  # stable: dense order on ties
        ranked = list(dict.fromkeys(sources[key] for key, _ in fused))[:K]
        values.append(score(ranked, c.query.relevant)["ndcg@10"])
    return grouped([c.query for c in candidates], values)


def margins(table: dict[str, dict[str, dict[str, float]]]) -> dict[str, dict[str, Any]]:
    """Per fusion: its worst margin over the cells (and which), and its mean nDCG@10."""
    out = {}
    for name, by_collection in table.items():
        cells = [(c, g, v) for c, groups in by_collection.items() for g, v in groups.items()]
        gaps = [(v - max(table[r][c][g] for r in REFERENCES), f"{c}/{g}") for c, g, v in cells]
        worst = min(gaps)
        # issue 51's bar: at least plain RRF in every cell
        below_rrf = min((v - table[REFERENCES[-1]][c][g], f"{c}/{g}") for c, g, v in cells)
        out[name] = {
            "worst": round(worst[0], 4),
            "worst_cell": worst[1],
            "vs_rrf": round(below_rrf[0], 4),
            "vs_rrf_cell": below_rrf[1],
            "mean": round(statistics.fmean(v for *_, v in cells), 4),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache", type=Path, metavar="DIR", help="embedding cache kept between runs"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=[c.name for c in dev_collections()],
        help="this development collection only (repeatable; default: all of them)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        collected: dict[str, list[Candidates]] = {}
        real: dict[str, dict[str, dict[str, float]]] = {}
        with embedder() as url:
            for collection in dev_collections():
                if args.only and collection.name not in args.only:
                    continue
                print(f"--- {collection.name}", file=sys.stderr)
                collected[collection.name], real[collection.name] = collect(
                    collection, url, args.cache
                )
    except STOPS as exc:
        print(f"error: {describe(exc)}", file=sys.stderr)
        return 1
    table = {
        name: {c: replay(found, fuse) for c, found in collected.items()}
        for name, fuse in families().items()
    }
    for name in MEASURED:
        table[name] = {c: real[c][name] for c in collected}
    ranked = sorted(margins(table).items(), key=lambda item: (-item[1]["worst"], -item[1]["mean"]))
    print(f"fusions by worst margin against {', '.join(REFERENCES)} (nDCG@10, k={K}):")
    rows = [
        [
            n,
            f"{m['worst']:+.4f}",
            m["worst_cell"],
            f"{m['vs_rrf']:+.4f}",
            m["vs_rrf_cell"],
            m["mean"],
        ]
        for n, m in ranked
    ]
    header = ["fusion", "worst margin", "in", "worst vs rrf", "in", "mean nDCG@10"]
    print(format_table(header, rows))
    hybrid = table["hybrid search"]
    cells = [(c, g) for c, groups in hybrid.items() for g in groups]
    check = [[f"{c}/{g}", hybrid[c][g], table[SHIPPED][c][g]] for c, g in cells]
    print(f"\ncheck: hybrid search through Qdrant vs '{SHIPPED}' replayed")
    print(format_table(["cell", "hybrid search", "replayed"], check))
    worst_gap = max(abs(a - b) for _, a, b in check)
    print(f"largest difference {worst_gap:.4f}; wall time {time.perf_counter() - started:.0f}s")
    if args.json:
        print(json.dumps({"margins": dict(ranked), "ndcg@10": table}))
    return 0 if math.isclose(worst_gap, 0.0, abs_tol=1e-3) else 1


if __name__ == "__main__":
    raise SystemExit(main())
