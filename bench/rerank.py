"""Added latency of the rerank stage: each candidate reranker's shape and each cost lever,
side by side in one run, through the service's own code.

Random weights in each candidate's published shape (bench/rerank_models.py; cost does not
depend on the weights). Each request reranks one query (12 tokens) against 10, 20, 30 and 50
passages of 300 tokens through embedder/rerank.py's Reranker and embedder/batching.py's Engine
in this process (tokenizing, cutting each pair to RERANK_MAX_TOKENS, length-sorted
micro-batches under EMBED_BATCH_TOKENS, the forward passes). Rows:

- the small cross-encoders (MiniLM L12/L6/L4/L2, mxbai-rerank-xsmall, TinyBERT L2) with the levers
  that cut their cost: precision (RERANK_DTYPE fp32 / bf16 / int8 = torch dynamic int8 Linear
  layers, per-channel), pair length (RERANK_MAX_TOKENS 512 ... 128) and threads (EMBED_THREADS);
  all loaded at once and their requests interleaved, so load from other processes hits every row
  alike;
- the shipped default (RERANK_MODEL, RERANK_DTYPE=auto as it resolves here, RERANK_MAX_TOKENS):
  its 30-passage p50 is the `added_p50_ms_30` the target is about;
- the larger ones (bge-reranker-base, mxbai-rerank-base, bge-reranker-v2-m3, the
  Qwen3-Reranker-0.6B shape), one at a time; when a single 10-passage run exceeds the time budget
  the larger sizes are estimated linearly (`~`); `--quick` builds them with 2 layers and scales
  to full depth (`*`).

    uv run bench/rerank.py [--quick] [--json] [--repeats N]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import cpu_name
from bench.rerank_models import MODELS, WORDS, build_cross_encoder
from embed_server.batching import Engine
from embed_server.config import EmbedderSettings
from embed_server.hardware import cpu_class, cpu_features, resolve_device, resolve_rerank_dtype

ROOT = Path(__file__).resolve().parent.parent


QUICK_LAYERS = 2
TARGET_S = 0.3  # the default must add at most this (p50, 30 passages; issue 51)
SIZES, QUICK_SIZES = (10, 20, 30, 50), (10, 30)
QUERY_TOKENS, PASSAGE_TOKENS = 12, 300
L12, XSMALL = "cross-encoder/ms-marco-MiniLM-L12-v2", "mixedbread-ai/mxbai-rerank-xsmall-v1"
L6, L4, L2, TINY = (
    "cross-encoder/ms-marco-MiniLM-L6-v2",
    "cross-encoder/ms-marco-MiniLM-L4-v2",
    "cross-encoder/ms-marco-MiniLM-L2-v2",
    "cross-encoder/ms-marco-TinyBERT-L2-v2",
)
# the larger rerankers, measured one at a time (--quick: 2 layers, scaled to full depth)
BIG = (
    "BAAI/bge-reranker-base",
    "mixedbread-ai/mxbai-rerank-base-v1",
    "BAAI/bge-reranker-v2-m3",
    "Qwen/Qwen3-Reranker-0.6B",
)


@dataclass(frozen=True)
class Variant:
    model: str
    dtype: str  # fp32, bf16 or int8 (as the service resolves RERANK_DTYPE)
    max_tokens: int = 512  # RERANK_MAX_TOKENS
    threads: int = 0  # EMBED_THREADS; 0 = this machine's default

    def label(self) -> str:
        threads = f", {self.threads} thread{'s' * (self.threads > 1)}" if self.threads else ""
        return f"{self.model.split('/')[-1]} {self.dtype} {self.max_tokens}t{threads}"


def shipped_default() -> Variant:
    """The configuration a fresh install runs here: the settings' defaults, `auto` resolved."""
    fields = EmbedderSettings.model_fields
    dtype = resolve_rerank_dtype(fields["RERANK_DTYPE"].default, resolve_device("cpu"))
    return Variant(fields["RERANK_MODEL"].default, dtype, fields["RERANK_MAX_TOKENS"].default)


def small_variants(default: Variant, quick: bool) -> list[Variant]:
    """The levers, baseline first (MiniLM-L6 fp32 at 512 tokens: what shipped before)."""
    t = default.max_tokens
    if quick:
        rows = [Variant(L6, "fp32"), Variant(L6, "int8"), default]
        rows += [Variant(m, default.dtype, t) for m in (L12, XSMALL, L4, L2, TINY)]
    else:
        rows = [
            Variant(L6, d, n)
            for d, n in [
                ("fp32", 512),
                ("bf16", 512),
                ("int8", 512),
                ("fp32", 256),
                ("int8", 256),
                ("int8", 192),
                ("fp32", 128),
                ("int8", 128),
            ]
        ]
        rows += [Variant(m, d, n) for m in (L4, L2) for d, n in
                 [("fp32", 512), ("int8", 512), ("int8", 256)]]  # fmt: skip
        rows += [Variant(m, d) for m in (L12, XSMALL) for d in ("fp32", "int8")]
        rows += [Variant(TINY, "fp32"), Variant(TINY, "int8"), Variant(TINY, "fp32", 256), default]
        rows.append(Variant(default.model, default.dtype, t, threads=1))
    return list(dict.fromkeys(rows))


def big_variants(quick: bool) -> list[Variant]:
    return [Variant(m, d) for m in BIG for d in (("fp32",) if quick else ("fp32", "bf16"))]


def describe_cpu() -> str:
    name = cpu_name().rsplit(", ", 1)[0]
    threads = EmbedderSettings(_env_file=None).EMBED_THREADS
    return f"{name}, {threads} threads, CPU class {cpu_class(cpu_features())}"


def load(variant: Variant, folder: Path, settings: EmbedderSettings, layers: int) -> Any:
    family, shape = MODELS[variant.model]
    shape = shape | {"num_hidden_layers": layers}
    from embed_server.rerank import Reranker

    if not folder.exists():
        build_cross_encoder(folder, family, shape)
    update: dict[str, Any] = {
        "RERANK_MODEL": str(folder),
        "RERANK_DTYPE": variant.dtype,
        "RERANK_MAX_TOKENS": variant.max_tokens,
    }
    if variant.threads:
        update["EMBED_THREADS"] = variant.threads
    return Reranker(settings.model_copy(update=update))


def make_pairs(n: int, rng: random.Random, tokens: int = PASSAGE_TOKENS) -> list[tuple[str, str]]:
    def words(count: int) -> str:
        return " ".join(f"w{rng.randrange(WORDS)}" for _ in range(count))

    query = words(QUERY_TOKENS)
    return [(query, words(tokens)) for _ in range(n)]


def timed(engine: Engine, pairs: list[tuple[str, str]]) -> float:
    started = time.perf_counter()
    scores = engine.submit(pairs).result().vectors  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    assert scores.shape == (len(pairs), 1) and np.isfinite(scores).all()
    return elapsed


def start(model: Any, settings: EmbedderSettings) -> Engine:
    engine = Engine(
        model, batch_tokens=settings.EMBED_BATCH_TOKENS, queue_size=4, max_round_inputs=1000
    )
    engine.start()
    return engine


def cells(samples: dict[int, list[float]], sizes: Sequence[int], layers: int | None) -> dict:
    out: dict[int, dict[str, Any]] = {}
    base = samples[sizes[0]]
    for n in sizes:
        got = samples[n]
        if got:
            p95 = float(np.percentile(got, 95)) if len(got) > 1 else got[0]
            out[n] = {"p50": statistics.median(got), "p95": p95, "runs": len(got)}
            out[n]["scaled_from_layers"] = layers
        else:  # linear in passages: every passage is one more pair of equal length
            out[n] = {"p50": statistics.median(base) * n / sizes[0], "runs": 0}
    return out


def measure(
    small: Sequence[Variant],
    big: Sequence[Variant],
    repeats: int,
    budget_s: float,
    log: Callable[[str], None],
    *,
    sizes: Sequence[int],
    tokens: int,
    max_layers: int | None = None,
) -> dict[Variant, dict[int, dict[str, Any]]]:
    """Latency samples per variant and size: the small ones all loaded, requests interleaved;
    the big ones one at a time (`max_layers`: built that deep, times scaled to full depth)."""
    settings = EmbedderSettings(_env_file=None, EMBED_MODEL="-")
    rng = random.Random(14)
    results: dict[Variant, dict[int, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        engines: dict[Variant, Engine] = {}
        for v in small:
            layers = MODELS[v.model][1]["num_hidden_layers"]
            engines[v] = start(load(v, Path(tmp) / v.model.replace("/", "--"), settings, layers),
                               settings)  # fmt: skip
            timed(engines[v], make_pairs(2, rng))  # warm-up
        log(f"  built {len(engines)} small rerankers; interleaving their requests")
        samples = {v: {n: [] for n in sizes} for v in small}
        spent = dict.fromkeys(small, 0.0)
        for _ in range(repeats):
            for n in sizes:
                for v in small:
                    if samples[v][n] and spent[v] > budget_s:
                        continue
                    took = timed(engines[v], make_pairs(n, rng, tokens))
                    samples[v][n].append(took)
                    spent[v] += took
        for v, engine in engines.items():
            engine.stop()
            results[v] = cells(samples[v], sizes, None)
        del engines
        gc.collect()
        for v in big:
            results[v] = measure_big(v, Path(tmp), settings, rng, repeats, budget_s, log,
                                     sizes=sizes, tokens=tokens, max_layers=max_layers)  # fmt: skip
    return results


def measure_big(
    v: Variant,
    tmp: Path,
    settings: EmbedderSettings,
    rng: random.Random,
    repeats: int,
    budget_s: float,
    log: Callable[[str], None],
    *,
    sizes: Sequence[int],
    tokens: int,
    max_layers: int | None,
) -> dict[int, dict[str, Any]]:
    started = time.perf_counter()
    full = MODELS[v.model][1]["num_hidden_layers"]
    layers = min(full, max_layers) if max_layers else full
    model = load(v, tmp / f"{v.model.replace('/', '--')}-{layers}", settings, layers)
    log(f"  built {v.label()}, {layers} of {full} layers ({time.perf_counter() - started:.0f} s)")
    engine = start(model, settings)
    timed(engine, make_pairs(2, rng))
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    spent = 0.0
    for _ in range(repeats):
        for n in sizes:
            if samples[n] and spent > budget_s:
                continue
            if not samples[n] and samples[sizes[0]] and n != sizes[0]:
                estimate = statistics.median(samples[sizes[0]]) * n / sizes[0]
                if spent + estimate > budget_s * 1.5:
                    continue
            took = timed(engine, make_pairs(n, rng, tokens))
            samples[n].append(took * full / layers)
            spent += took
    engine.stop()
    del engine, model
    gc.collect()
    return cells(samples, sizes, layers if layers != full else None)


def cell(value: dict[str, Any]) -> str:
    if not value["runs"]:
        return f"~{value['p50'] * 1000:,.0f} (est.)"
    mark = "*" if value.get("scaled_from_layers") else ""
    return f"{mark}{value['p50'] * 1000:,.0f} / {value['p95'] * 1000:,.0f}"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"fewer rows, sizes {','.join(map(str, QUICK_SIZES))}, 3 runs; the 0.6B models "
        f"in fp32 only, built with {QUICK_LAYERS} layers and scaled to full depth (~3 minutes)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON object as the last line")
    p.add_argument("--repeats", type=int, default=None, help="runs per cell (default 5; quick 3)")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated shapes to measure")
    p.add_argument(
        "--passage-tokens", type=int, default=PASSAGE_TOKENS, help="tokens per passage (300)"
    )
    p.add_argument("--sizes", default=None, help="passages per request (10,20,30,50; quick 10,30)")
    return p


def print_table(results: dict[Variant, dict[int, dict[str, Any]]], sizes: Sequence[int],
                default: Variant) -> None:  # fmt: skip
    rows = list(results)
    base = rows[0]
    width = max(len(v.label()) for v in rows) + 2
    head = "  ".join(f"{f'{n} passages p50 / p95 ms':>26s}" for n in sizes)
    print(f"{'reranker shape, precision, max tokens':{width}s}  {head}  {'x base @30':>10s}")
    for v in rows:
        row = "  ".join(f"{cell(results[v][n]):>26s}" for n in sizes)
        ratio = results[base][30]["p50"] / results[v][30]["p50"]
        mark = "  <- shipped default" if v == default else ""
        print(f"{v.label():{width}s}  {row}  {ratio:>9.2f}x{mark}")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    chosen = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in MODELS]
    if unknown or not chosen:
        print(
            f"error: --models: unknown {unknown}; choose from {', '.join(MODELS)}", file=sys.stderr
        )
        return 2
    repeats = args.repeats or (3 if args.quick else 5)
    try:
        default_sizes = QUICK_SIZES if args.quick else SIZES
        sizes = sorted(
            {int(n) for n in (args.sizes or "").split(",") if n.strip()} or default_sizes
        )
    except ValueError:
        sizes = []
    if 30 not in sizes or sizes[0] < 1 or args.passage_tokens < 1:
        print("error: --sizes must include 30 (the target's size); sizes and "
              "--passage-tokens must be positive", file=sys.stderr)  # fmt: skip
        return 2
    budget = 20.0 if args.quick else 240.0
    default = shipped_default()
    small = [v for v in small_variants(default, args.quick) if v.model in chosen]
    big = [v for v in big_variants(args.quick) if v.model in chosen]
    print(
        f"CPU: {describe_cpu()}; shipped default {default.label()} (RERANK_DTYPE=auto here: "
        f"{default.dtype}); query {QUERY_TOKENS} + passage {args.passage_tokens} tokens per "
        f"pair; up to {repeats} runs per cell",
        flush=True,
    )
    results = measure(small, big, repeats, budget, lambda line: print(line, flush=True),
                      sizes=sizes, tokens=args.passage_tokens,
                      max_layers=QUICK_LAYERS if args.quick else None)  # fmt: skip
    print_table(results, sizes, default)
    if args.quick and big:
        print(f"* built with {QUICK_LAYERS} layers, time scaled to the full depth (--quick)")
    added = results[default][30]["p50"] * 1000 if default in results else None
    if added is not None:
        verdict = "meets" if added <= TARGET_S * 1000 else "MISSES"
        print(
            f"shipped default: {default.label()}, adds {added:,.0f} ms p50 for 30 passages: "
            f"{verdict} the target of <= {TARGET_S * 1000:.0f} ms on this machine"
        )
    if args.json:
        table = {
            v.label(): {str(n): {k: round(x, 4) if isinstance(x, float) else x
                                 for k, x in c.items()} for n, c in cells_.items()}
            for v, cells_ in results.items()
        }  # fmt: skip
        summary = {"cpu": describe_cpu(), "latency_s": table, "default": asdict(default)}
        summary |= {
            "default_model": default.model if added is not None else None,
            "added_p50_ms_30": added and round(added, 1),
        }
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
