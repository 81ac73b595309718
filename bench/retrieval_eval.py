"""bench/retrieval.py's run: a folder ingested into a temp store (through the real ingest), every
query searched in each pipeline and domain (and reranked, with --rerank), scored into a Result."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from bench.common import BenchError, bench_settings, copy_notes
from bench.retrieval_queries import K, Query, average, score
from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.core.settings import Settings
from kb.core.state import CACHE_NAME
from kb.embedding.client import EmbedClient
from kb.ingest.progress import Summary
from kb.search import rerank as kb_rerank
from kb.search.domains import Domain, search_all
from kb.search.query import Mode, search
from kb.store import optimize
from kb.store.points import Store
from kb.store.query import HYBRID_FUSION, Fusion

MODES: tuple[Mode, ...] = ("keyword", "semantic", "hybrid")
REFERENCE: Fusion = "rrf"  # the reference pipeline --all runs beside the three modes
ALSO = "_also"  # where --also's folder is copied in the notes folder


# --- search ------------------------------------------------------------------------------


class Pipeline(NamedTuple):
    """A search as a row: its label, mode, and the fusion a hybrid one merges by."""

    label: str
    mode: Mode
    fusion: Fusion = HYBRID_FUSION


def pipelines(fusions: Sequence[Fusion] = (), reference: bool = False) -> list[Pipeline]:
    """The three modes, the reference pipeline (`reference`), then hybrid by each of `fusions`."""
    rows = [Pipeline(mode, mode) for mode in MODES]
    if reference:
        rows.append(Pipeline(REFERENCE, "hybrid", REFERENCE))
    rows += [Pipeline(f"hybrid fusion={f}", "hybrid", f) for f in fusions]
    return rows


def ranker(
    prose: tuple[Store, EmbedClient],
    code: tuple[Store, EmbedClient],
    mode: Mode,
    domain: Domain = "all",
    fusion: Fusion = HYBRID_FUSION,
) -> Callable[[str], list[str]]:
    """query -> the top K distinct sources in `mode` and `domain`, each file ranked by its best
    chunk."""

    def rank(text: str) -> list[str]:
        hits = search_all(prose, code, text, K, domain=domain, mode=mode, per_note=1, fusion=fusion)
        return list(dict.fromkeys(h.source for h in hits if h.source is not None))

    return rank


def reranked(
    store: Store,
    client: EmbedClient,
    settings: Settings,
    queries: list[Query],
    weights: list[float],
) -> dict[str, list[list[str]]]:
    """Per weight, each query's top K sources after reranking the hybrid top candidates."""
    out: dict[str, list[list[str]]] = {rerank_mode(w): [] for w in weights}
    for q in queries:
        hits = search(store, client, q.text, settings.RERANK_CANDIDATES, mode="hybrid", per_note=1)
        documents = [kb_rerank.passage(h, settings.RERANK_MAX_CHARS) for h in hits]
        scores = client.rerank(q.text, documents, settings.RERANK_TIMEOUT) if hits else []
        for w in weights:
            ordered = [hits[i].source for i in kb_rerank.order(scores, w)]
            out[rerank_mode(w)].append(list(dict.fromkeys(s for s in ordered if s))[:K])
    return out


def rerank_mode(weight: float) -> str:
    return f"hybrid+rerank w={weight:g}"


def require_reranker(client: EmbedClient) -> str:
    status = client.health().get("rerank") or {}
    if status.get("status") != "ok":
        raise BenchError(
            f"--rerank: the embedder at {client.url} serves no reranker ({status or 'off'}); "
            "set RERANK_MODEL to a cross-encoder folder, or EMBED_URL to an embedder with one"
        )
    return str(status["model"])


# --- the run -----------------------------------------------------------------------------


@dataclass
class Result:
    metrics: dict[str, dict[str, dict[str, float]]]  # pipeline -> "all"/kind -> metric -> value
    counts: dict[str, int]  # "all"/kind -> number of queries
    ms_per_query: dict[str, float]
    notes: int
    chunks: int
    ingest_s: float
    model: str = ""
    precision: str = ""  # the embedder's dtype and engine (its /health), e.g. "fp32 torch"
    cached: int = 0  # chunks whose vector came from the embedding cache (--cache)


@dataclass
class Cache:
    """The embedding cache kept in a folder between runs (`--cache`): copied into a run's state
    folder before ingest and back after it. It holds vectors keyed by content hashes."""

    folder: Path | None

    def restore(self, state_dir: Path) -> None:
        if self.folder is not None and (self.folder / CACHE_NAME).is_file():
            state_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.folder / CACHE_NAME, state_dir / CACHE_NAME)

    def keep(self, state_dir: Path) -> None:
        if self.folder is not None and (state_dir / CACHE_NAME).is_file():
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copyfile(state_dir / CACHE_NAME, self.folder / CACHE_NAME)


def evaluate(
    docs_dir: Path,
    queries: list[Query],
    embed_url: str,
    also: Path | None = None,
    domains: Sequence[Domain] = ("all",),
    weights: Sequence[float] = (),
    index: str = "",
    rows: Sequence[Pipeline] | None = None,
    cache: Path | None = None,
) -> Result:
    """Ingest `docs_dir` into a temp store and score every query in each pipeline of `rows`
    (default: the three modes) and domain."""
    rows = list(rows) if rows is not None else pipelines()
    with tempfile.TemporaryDirectory(prefix="kb-bench-retrieval-") as tmp:
        notes_dir = Path(tmp) / "notes"
        copied = copy_notes(docs_dir, notes_dir)
        if also is not None:
            copied += copy_notes(also, notes_dir / ALSO)
        print(f"copied {copied} files from {docs_dir}; ingesting", file=sys.stderr)
        settings = bench_settings(notes_dir, Path(tmp) / "qdrant", embed_url)
        kept = Cache(cache)
        kept.restore(settings.STATE_DIR)
        with (
            open_store(settings) if not index else indexed_store(settings, index) as store,
            embed_client(settings) as client,
            embed_client(settings, code=True) as code_client,
        ):
            prose, code = (store, client), (store.beside(settings.CODE_COLLECTION), code_client)
            if weights:
                print(f"reranker: {require_reranker(client)}", file=sys.stderr)
            ingested = ingest(settings, store, client, docs_dir, index, kept)
            per_query, ms = searched(prose, code, queries, domains, rows)
            if weights:
                rerank_rows(store, client, settings, queries, list(weights), per_query, ms)
    return result_of(queries, per_query, ms, ingested)


class Ingested(NamedTuple):
    """What the run's ingest did, and with which embedder."""

    summary: Summary
    seconds: float
    model: str
    precision: str  # the embedder's dtype and engine (its /health), e.g. "fp32 torch"


def ingest(
    settings: Settings, store: Store, client: EmbedClient, docs_dir: Path, index: str, kept: Cache
) -> Ingested:
    """The run's ingest, timed (with the engine's index built when `index`), the embedding
    cache kept; BenchError lists the first files that failed."""
    started = time.perf_counter()
    summary = run(settings, client, store)
    kept.keep(settings.STATE_DIR)
    model = client.model
    health = client.health()
    precision = f"{health.get('dtype', '?')} {health.get('backend', '?')}"
    if index:  # build the engine's search index over every segment, as ingest.py does
        optimize.after_ingest(store, [store.collection], written=summary.chunks)
    ingest_s = time.perf_counter() - started
    if summary.failed:
        listed = "; ".join(f"{f.source}: {f.reason}" for f in summary.failed[:5])
        raise BenchError(f"{len(summary.failed)} files in {docs_dir} failed: {listed}")
    print(
        f"ingested {len(summary.ingested)} notes ({summary.chunks} chunks) in {ingest_s:.1f}s",
        file=sys.stderr,
    )
    return Ingested(summary, ingest_s, model, precision)


def searched(
    prose: tuple[Store, EmbedClient],
    code: tuple[Store, EmbedClient],
    queries: list[Query],
    domains: Sequence[Domain],
    rows: Sequence[Pipeline],
) -> tuple[dict[str, list[dict[str, float]]], dict[str, float]]:
    """Each query's scores and the ms per query, per row (and domain, when more than one)."""
    per_query: dict[str, list[dict[str, float]]] = {}
    ms: dict[str, float] = {}
    for domain in domains:
        for row in rows:
            rank = ranker(prose, code, row.mode, domain, row.fusion)
            label = row.label if len(domains) == 1 else f"{row.label} domain={domain}"
            started = time.perf_counter()
            per_query[label] = [score(rank(q.text), q.relevant) for q in queries]
            ms[label] = 1000 * (time.perf_counter() - started) / len(queries)
            print(f"{label}: {len(queries)} queries, {ms[label]:.0f} ms each", file=sys.stderr)
    return per_query, ms


def rerank_rows(
    store: Store,
    client: EmbedClient,
    settings: Settings,
    queries: list[Query],
    weights: list[float],
    per_query: dict[str, list[dict[str, float]]],
    ms: dict[str, float],
) -> None:
    """The reranked rows (one per weight, one reranker call per query) added to `per_query`
    and `ms`."""
    started = time.perf_counter()
    ranked = reranked(store, client, settings, queries, weights)
    each = 1000 * (time.perf_counter() - started) / len(queries)
    for mode, ranks in ranked.items():
        per_query[mode] = [score(r, q.relevant) for r, q in zip(ranks, queries, strict=True)]
        ms[mode] = each
    print(f"rerank: {len(queries)} queries, {each:.0f} ms each", file=sys.stderr)


def result_of(
    queries: list[Query],
    per_query: dict[str, list[dict[str, float]]],
    ms: dict[str, float],
    ingested: Ingested,
) -> Result:
    """The metrics averaged over all queries and over each kind of query."""
    groups: dict[str, list[int]] = {"all": list(range(len(queries)))}
    for i, q in enumerate(queries):
        if q.kind is not None:
            groups.setdefault(q.kind, []).append(i)
    metrics = {
        mode: {g: average([rows[i] for i in idx]) for g, idx in groups.items()}
        for mode, rows in per_query.items()
    }
    summary = ingested.summary
    return Result(
        metrics=metrics,
        counts={g: len(idx) for g, idx in groups.items()},
        ms_per_query=ms,
        notes=len(summary.ingested),
        chunks=summary.chunks,
        ingest_s=ingested.seconds,
        model=ingested.model,
        precision=ingested.precision,
        cached=summary.embedded_cached,
    )


def indexed_store(settings: Settings, index: str) -> Store:
    """Embedded storage on Qdrant's engine whose every segment gets the HNSW index (the
    indexing threshold at its minimum, so a small corpus is indexed too, as a big one is), and
    with `index` "int8" Qdrant's int8 scalar quantization: quantization's effect on retrieval,
    measured against "hnsw" on the same documents."""
    import qdrant_edge as qe

    from kb.store.edge import tuned_store

    int8 = qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99, always_ram=True)
    return tuned_store(
        settings.QDRANT_PATH,
        settings.COLLECTION,
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1),
        quantization=int8 if index == "int8" else None,
    )
