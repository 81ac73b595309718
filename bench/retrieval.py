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
GATE_TOLERANCE; tests/bench/test_retrieval_gate.py runs it.

`--rerank` adds rows for hybrid search reranked by the embedder's cross-encoder (kb.search.rerank):
its best RERANK_CANDIDATES passages reordered, for each weight of `--rerank-weights` (1 = the
reranker's order alone, below 1 blended with the first stage's rank; one reranker call per query
serves every weight). It needs a reranker: the one at EMBED_URL, or RERANK_MODEL (a folder
holding a cross-encoder) for the embedder started here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import (
    CRANFIELD,
    STOPS,
    BenchError,
    describe,
    documents,
    embedder,
    require_file,
)
from bench.corpora import COLLECTIONS, Collection, dev_collections
from bench.retrieval_eval import Cache, Result, evaluate, pipelines
from bench.retrieval_gate import baseline_of, read_baseline, regressions
from bench.retrieval_queries import K, Query, average, load_queries, score
from bench.retrieval_report import model_name, report, report_all, summary_json
from kb.search.domains import DOMAINS
from kb.store.query import FUSIONS, Fusion

# what bench/ and tests/ import from here, now in the modules beside it
__all__ = ["Cache", "K", "Query", "average", "evaluate", "load_queries", "model_name", "score"]


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


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="R@5, R@10, MRR@10 and nDCG@10 of keyword, semantic and hybrid search "
        "over a folder of notes and a judged queries file (default: Cranfield)."
    )
    add_folder_options(parser)
    add_collection_options(parser)
    return parser


def add_folder_options(parser: argparse.ArgumentParser) -> None:
    """One folder's run: DOCS_DIR and its queries, the reranker, a folder beside it, the
    domains, the engine's index."""
    parser.add_argument(
        "docs_dir",
        type=Path,
        metavar="DOCS_DIR",
        nargs="?",
        default=CRANFIELD / "docs",
        help="notes to ingest, a folder or NAME.tar.gz of the folder NAME/ (default: the "
        "Cranfield documents)",
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
        help="another folder (or NAME.tar.gz) ingested beside DOCS_DIR (never judged): e.g. "
        "code beside notes",
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


def add_collection_options(parser: argparse.ArgumentParser) -> None:
    """--all and the gate's baseline; the fusions, the cache and --json (any run)."""
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
        docs = documents(args.docs_dir, "DOCS_DIR")
        require_file(args.queries, "QUERIES_JSONL")
        queries = load_queries(args.queries, docs)
        weights: list[float] = []
        if args.rerank:
            try:
                weights = [float(w) for w in args.rerank_weights.split(",") if w.strip()]
            except ValueError:
                raise BenchError(f"--rerank-weights {args.rerank_weights!r}: numbers") from None
            if not weights or not all(0 <= w <= 1 for w in weights):
                raise BenchError(f"--rerank-weights {args.rerank_weights!r}: each within 0..1")
        also = None if args.also is None else documents(args.also, "--also")
        with embedder() as url:
            result = evaluate(docs.resolve(), queries, url, also,
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
