"""bench/embed_throughput.py's timing: the candidate engines loaded as the service loads them,
the naive baseline and the service's Engine timed on the same chunks, and one query's latency."""

from __future__ import annotations

import gc
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from embed_server.batching import Engine
from embed_server.config import EmbedderSettings
from embed_server.model import Embedder, int8_linear

# (EMBED_BACKEND, EMBED_DTYPE); torch fp32 first: the reference of the accuracy figures.
# "int8-per-tensor" is torch.ao's dynamic int8, what EMBED_DTYPE=int8 ran on torch before issue
# 33 (model.int8_linear; the reranker's RERANK_DTYPE=int8 still): kept as a row to compare.
PER_TENSOR = ("torch", "int8-per-tensor")
CANDIDATES = (
    ("torch", "fp32"),
    ("torch", "bf16"),
    ("torch", "int8"),
    ("onnx", "fp32"),
    ("onnx", "int8"),
    PER_TENSOR,
)
DEFAULTS = EmbedderSettings.model_fields
BATCH_TOKENS = DEFAULTS["EMBED_BATCH_TOKENS"].default
QUERY_TOKENS = 20
QUERY_RUNS = 20  # per engine, after two warm-up runs: p50 and p95
Engine_ = tuple[str, str]


def label(engine: Engine_) -> str:
    return " ".join(engine)


def auto_decision(model: Path, state: Path) -> dict[str, Any]:
    """What EMBED_BACKEND=auto, EMBED_DTYPE=auto measure and choose on `model`, as the shipped
    image does (it carries no ONNX export): /health's `auto` object; on a CPU class that is not
    measured (hardware.FIXED_CLASSES) the table's engine, in the same shape."""
    embedder = Embedder(
        EmbedderSettings(
            _env_file=None,
            EMBED_MODEL=str(model),
            EMBED_ONNX_DIR=str(state / "no-export"),
            EMBED_STATE_DIR=str(state),
        )
    )
    decision = embedder.decision
    assert decision is not None
    if not decision["measured"]:
        engine = f"{embedder.backend} {embedder.dtype}"
        decision |= {"documents": engine, "queries": engine, "seconds": 0.0, "candidates": []}
    del embedder
    gc.collect()
    return decision


def load(model: Path, engine: Engine_, exports: Path, **settings_: Any) -> Embedder:
    """An Embedder with the service's defaults (never the developer's .env) running `engine`;
    `settings_`: other EMBED_* settings (EMBED_DEVICE, say)."""
    backend, dtype = engine
    settings = EmbedderSettings(
        _env_file=None,
        EMBED_MODEL=str(model),
        EMBED_BACKEND=backend,
        EMBED_DTYPE="fp32" if engine == PER_TENSOR else dtype,
        EMBED_ONNX_DIR=str(exports),
        **settings_,
    )
    embedder = Embedder(settings)
    if engine == PER_TENSOR:
        embedder.model = int8_linear(embedder.model)
        embedder.dtype = "int8"
    return embedder


def query_latency(embedder: Any, runs: int = QUERY_RUNS) -> tuple[float, float]:
    """p50 and p95 seconds of one query of QUERY_TOKENS tokens, alone, through the engine."""
    text = [" ".join(f"w{i}" for i in range(QUERY_TOKENS - 1))]
    for _ in range(2):
        timed(embedder, text)
    return p50_p95([timed(embedder, text) for _ in range(runs)])


def contended_latency(embedder: Any, runs: int = QUERY_RUNS) -> dict[str, Any]:
    """`query_latency` while another process (a busy loop) holds a core: the first runs try
    every thread, embed_server.threads moves small passes to one; p50, p95 and the slowest."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        text = [" ".join(f"w{i}" for i in range(QUERY_TOKENS - 1))]
        seconds = [timed(embedder, text) for _ in range(runs)]
    finally:
        hog.kill()
        hog.wait()
    state = embedder.pass_threads.state()
    embedder.pass_threads.reset()  # the next measurement starts afresh
    p50, p95 = p50_p95(seconds)
    return {"p50_p95_s": [round(p50, 4), round(p95, 4)], "max_s": round(max(seconds), 4)} | state


def p50_p95(seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    return statistics.median(ordered), ordered[math.ceil(0.95 * len(ordered)) - 1]


SEARCH_WORDS = 10  # a search as typed: the model's query instruction, then about ten words


def search_latency(embedder: Any, runs: int = QUERY_RUNS) -> dict[str, Any] | None:
    """p50 and p95 seconds of one search query (the query instruction and SEARCH_WORDS words)
    alone through the engine: as served (the instruction's keys and values reused) and with
    every token computed, interleaved run by run; None where nothing is reused (ONNX, or a
    model without an instruction)."""
    cached = embedder.instruction_tokens
    if not cached:
        return None
    text = [embedder.prompt("query") + " ".join(f"w{i}" for i in range(SEARCH_WORDS))]
    seconds: dict[bool, list[float]] = {True: [], False: []}
    try:
        for run in range(runs + 2):  # two warm-up runs each
            for reuse in (True, False):
                embedder.reuse_instruction = reuse
                took = timed(embedder, text)
                if run >= 2:
                    seconds[reuse].append(took)
    finally:
        embedder.reuse_instruction = True
    return {
        "tokens": len(embedder.tokenize(text)[0]),
        "instruction_tokens_reused": cached,
        "reused_s": [round(x, 4) for x in p50_p95(seconds[True])],
        "whole_s": [round(x, 4) for x in p50_p95(seconds[False])],
    }


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
    with tempfile.TemporaryDirectory() as state:
        decision = auto_decision(model, Path(state))
    default = tuple(decision["documents"].split())
    if decision["measured"]:
        print(f"auto (the default) measured in {decision['seconds']:.1f} s: {decision['reason']}")
    else:
        print(f"auto (the default) did not measure: {decision['reason']}")
    for figures in decision["candidates"]:
        print(f"  auto measured {figures}")
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
    searches = {label(c): search_latency(m) for c, m in models.items()}
    query_engine = tuple(decision["queries"].split())
    contended = contended_latency(models[query_engine]) if query_engine[0] == "torch" else None
    return {
        "auto": decision,
        "default_engine": default,
        "default_query_engine": decision["queries"],
        "rates": rates,
        "engines": engines,
        "query_latency_s": latency,
        "search_latency": {name: v for name, v in searches.items() if v is not None},
        "contended_query": contended,
        "baseline": rates[BASELINE],
        "default": rates[DEFAULT.format(engine=label(default))],
        "best_small_requests": small,
    }
