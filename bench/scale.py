"""Embedded storage at scale: Qdrant's engine in-process (qdrant-edge, kb.store.edge) against
qdrant-client's local mode (the engine before it, read now only to carry old folders over:
kb.store.migrate.local_mode), side by side in one run, on synthetic chunks.

    uv run bench/scale.py            # 10k, 50k and 100k chunks (local mode at 10k only)
    uv run bench/scale.py --quick    # 10k only
    uv run bench/scale.py --json     # ... and the headline figures as JSON, last

No model runs: chunks get 1024-d dense vectors (Qwen3-Embedding-0.6B's size) clustered by note,
keyword vectors with BM25 weights over a Zipf-distributed vocabulary (what kb.embedding.keywords
makes of
prose: ~60 distinct terms a chunk), 1-3 tags a note. Writes go through kb.store.points.Store.replace
(the ingest path), queries through Store.query: hybrid (dense + keyword prefetches fused by
kb.store.query's formula) plain, with a tag filter, and one per note. Each engine and size runs
in a fresh process, so its resident memory is its own. Local mode stops at 10k: it scores every
point in Python (seconds a query beyond that).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import cpu_name
from kb.core.schema import KeywordVector, point_id
from kb.store.points import Point, Store
from kb.store.query import payload_filter

DIMS = 1024
VOCAB = 50_000
TERMS = 60  # distinct terms per chunk
TAGS = 40
LIMIT = 10
BATCH = 512  # chunks per write (what one ingest group holds at most is similar)
SIZES = (10_000, 50_000, 100_000)
QUERIES = {"edge": 40, "local": 8}  # per kind; local mode takes ~0.5 s a query at 10k
# untimed queries first: a freshly built index is read from disk into the page cache by the
# first searches (tens of ms each at 50k chunks), as a long-running server's already is
WARMUP = 20


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sparse(rng: np.random.Generator, terms: int) -> KeywordVector:
    ids = np.unique(rng.zipf(1.3, terms * 2) % VOCAB)[:terms]
    tf = rng.zipf(2.0, len(ids)).clip(1, 8)
    weights = tf * 2.2 / (tf + 1.2)  # BM25's term-frequency saturation (k1 1.2, b 0)
    return KeywordVector(indices=[int(i) for i in ids], values=[float(w) for w in weights])


def corpus(
    n: int, centroids: list[np.ndarray], seed: int = 7, dims: int = DIMS
) -> Iterator[list[Point]]:
    """n chunks in notes of 1-8 chunks, a batch of ~BATCH at a time (the whole corpus as Python
    floats would outweigh the store); each note's centroid goes to `centroids` (queries aim
    near them)."""
    rng = np.random.default_rng(seed)
    batch: list[Point] = []
    made = note = 0
    while made < n:
        size = min(int(rng.integers(1, 9)), n - made)
        centre = rng.standard_normal(dims)
        centroids.append(centre.astype(np.float32))
        tags = sorted({f"t{int(t) % TAGS}" for t in rng.zipf(1.5, int(rng.integers(1, 4)))})
        source = f"n{note}.md"
        dense = centre + 0.6 * rng.standard_normal((size, dims))
        dense /= np.linalg.norm(dense, axis=1, keepdims=True)
        for i in range(size):
            payload = {"source": source, "chunk_index": i, "tags": tags, "text": f"{source} {i}"}
            batch.append(Point(point_id(source, i), dense[i].tolist(), payload, sparse(rng, TERMS)))
        made += size
        note += 1
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def percentiles(times: list[float]) -> tuple[float, float]:
    ms = sorted(t * 1000 for t in times)
    return statistics.median(ms), ms[min(len(ms) - 1, int(0.95 * len(ms)))]


def open_store(engine: str, folder: str) -> Store:
    """`engine`: "local", "edge" (as ingest.py leaves it), "edge-raw" (as written, before the
    index is built) or "edge-int8" (with Qdrant's int8 scalar quantization)."""
    if engine == "local":
        from kb.store.migrate import local_mode

        return Store(local_mode(Path(folder)), "scale")
    if engine == "edge-int8":
        import qdrant_edge as qe

        from kb.store.edge import tuned_store

        int8 = qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99, always_ram=True)
        return tuned_store(folder, "scale", quantization=int8)
    return Store.open("scale", path=folder)


def measure(engine: str, n: int) -> dict[str, Any]:
    """Write n chunks into a new store, leave it as ingest.py does, and time the three query
    kinds (one process)."""
    from kb.store import collection, optimize

    centroids: list[np.ndarray] = []
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory(prefix="kb-scale-") as tmp:
        store = open_store(engine, tmp)
        collection.create(store, "synthetic", DIMS)
        write_s = 0.0
        for batch in corpus(n, centroids):
            started = time.perf_counter()
            store.replace(batch, [])  # new notes: nothing stale to delete
            write_s += time.perf_counter() - started
        result: dict[str, float] = {"write_per_s": n / write_s, "optimize_s": 0.0}
        if engine in ("edge", "edge-int8"):  # what ingest.py does after its writes
            started = time.perf_counter()
            optimize.after_ingest(store, [store.collection], written=n)
            result["optimize_s"] = time.perf_counter() - started
        for _ in range(WARMUP if engine != "local" else 0):
            centre = centroids[int(rng.integers(len(centroids)))]
            store.query(LIMIT, dense=centre.tolist(), keyword=sparse(rng, 3), per_note=1)
        kinds = {
            "plain": {},
            "tag": {"where": payload_filter(tags_any=["t3"])},
            "grouped": {"per_note": 1},
        }
        tops: list[list[str]] = []  # the grouped results, to compare engines (--raw)
        for kind, extra in kinds.items():
            times = []
            for _ in range(QUERIES["local" if engine == "local" else "edge"]):
                centre = centroids[int(rng.integers(len(centroids)))]
                dense = centre + 0.8 * rng.standard_normal(DIMS)
                dense /= np.linalg.norm(dense)
                keyword = sparse(rng, 3)
                t0 = time.perf_counter()
                hits = store.query(LIMIT, dense=dense.tolist(), keyword=keyword, **extra)
                times.append(time.perf_counter() - t0)
                assert hits, "a query found nothing"
                if kind == "grouped":
                    tops.append([f"{h.source}#{h.chunk_index}" for h in hits])
            result[f"{kind}_p50_ms"], result[f"{kind}_p95_ms"] = percentiles(times)
        result["rss_mb"] = rss_mb()
        store.close()
    return {**result, "grouped_top": tops}


def run_child(engine: str, n: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", engine, str(n)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def overlap(found: dict[str, Any], exact: dict[str, Any]) -> float:
    """Share of the exact scan's grouped results that `found` returned too (recall@10)."""
    pairs = list(zip(found["grouped_top"], exact["grouped_top"], strict=True))
    return sum(len(set(a) & set(b)) for a, b in pairs) / sum(len(b) for _, b in pairs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k chunks only")
    parser.add_argument("--json", action="store_true", help="print the headline figures as JSON")
    parser.add_argument(
        "--raw",
        action="store_true",
        help="also measure the engine as written, before ingest.py builds its index (edge-raw)",
    )
    parser.add_argument(
        "--int8",
        action="store_true",
        help="also measure the engine with int8 scalar quantization (edge-int8)",
    )
    parser.add_argument(
        "--sizes", help="comma-separated chunk counts instead of 10000,50000,100000"
    )
    parser.add_argument(
        "--engines", help="comma-separated engines to run at every size instead of the default"
    )
    parser.add_argument("--one", nargs=2, metavar=("ENGINE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]))))
        return 0
    from bench.common import format_table

    sizes = SIZES[:1] if args.quick else SIZES
    if args.sizes:
        sizes = tuple(int(n) for n in args.sizes.split(","))
    print(f"CPU: {cpu_name()}; {DIMS}-d dense + keyword, hybrid queries, top {LIMIT}")
    rows = []
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for n in sizes:
        engines = ["local", "edge"] if n <= SIZES[0] else ["edge"]
        engines += ["edge-raw"] * args.raw + ["edge-int8"] * args.int8
        if args.engines:
            engines = args.engines.split(",")
        for engine in engines:
            r = found[(engine, n)] = run_child(engine, n)
            rows.append(
                [
                    engine,
                    n,
                    f"{r['plain_p50_ms']:.1f} / {r['plain_p95_ms']:.1f}",
                    f"{r['tag_p50_ms']:.1f} / {r['tag_p95_ms']:.1f}",
                    f"{r['grouped_p50_ms']:.1f} / {r['grouped_p95_ms']:.1f}",
                    f"{r['write_per_s']:.0f}",
                    f"{r['optimize_s']:.0f}",
                    f"{r['rss_mb']:.0f}",
                ]
            )
            print("  ".join(map(str, rows[-1])), file=sys.stderr, flush=True)  # as it comes
    print(format_table(HEADERS, rows))
    for n in sizes:  # the index and quantization against the exact scan, same queries
        exact = found.get(("edge-raw", n))
        for engine in ("edge", "edge-int8"):
            if exact and (engine, n) in found:
                print(f"{engine} at {n:,}: {overlap(found[(engine, n)], exact):.1%} of the exact "
                      "scan's grouped top 10 (edge-raw)")  # fmt: skip
    local, edge = found.get(("local", SIZES[0])), found.get(("edge", SIZES[0]))
    if local and edge:
        grouped = local["grouped_p50_ms"] / edge["grouped_p50_ms"]
        plain = local["plain_p50_ms"] / edge["plain_p50_ms"]
        print(f"edge vs local at {SIZES[0]:,}: {grouped:.0f}x grouped, {plain:.0f}x plain (p50)")
    if args.json:

        def grouped_p50(engine: str, n: int) -> float | None:
            return found[(engine, n)]["grouped_p50_ms"] if (engine, n) in found else None

        headline = {
            "edge_100k_grouped_p50_ms": grouped_p50("edge", 100_000),
            "local_10k_grouped_p50_ms": grouped_p50("local", 10_000),
            "edge_10k_grouped_p50_ms": grouped_p50("edge", 10_000),
        }
        print(json.dumps(headline))
    return 0


HEADERS = [
    "engine",
    "chunks",
    "plain p50/p95 ms",
    "tag p50/p95 ms",
    "grouped p50/p95 ms",
    "writes/s",
    "index s",
    "RSS MB",
]

if __name__ == "__main__":
    sys.exit(main())
