"""auto's measuring (embed_server.autotune): each candidate engine checked against torch fp32's
vectors of the probe texts, then timed on a document batch and on a query; the fastest chosen."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from embed_server.autotune_decision import (
    BOUND,
    DOC_TOKENS,
    QUERY_TOKENS,
    Decision,
    Engine,
    Figures,
    label,
    parse,
)
from embed_server.batching import encode_ids
from embed_server.probe import CALIBRATION_TEXTS, PROBE_DOCUMENTS, PROBE_QUERIES
from embed_server.threads import MAX_SIDE_BY_SIDE

if TYPE_CHECKING:
    from embed_server.model import Embedder

DOC_RUNS = 3
QUERY_RUNS = 5
# Timings run through this many of the model's layers and are scaled to all of them: its layers
# are one shape, so each costs every engine the same, and a forward through 4 of Qwen3-0.6B's 28
# takes a seventh of the time (the probe's accuracy check always runs the whole model).
TIMED_LAYERS = 4
clock = time.perf_counter  # what the timings read (a test's fake engines bring their own)


def _ids(embedder: Embedder, length: int) -> np.ndarray:
    """`length` real token ids (the calibration texts repeated), as one input."""
    text = " ".join(CALIBRATION_TEXTS)
    ids = embedder.tokenize([text])[0]
    while len(ids) < length:
        ids = np.concatenate([ids, ids])
    return np.ascontiguousarray(ids[-length:])


# Memory of an engine against torch fp32's, before it is loaded (measured: Qwen3-0.6B shape).
_SIZE = {"fp32": 1.0, "bf16": 0.5, "int8": 0.56}
ROOM = 1.15  # engines loaded at once while measuring: at most this times torch fp32's memory
CLOSE = 1.10  # timings this close to the fastest: the most accurate of them is chosen


def _blocks(model: Any) -> tuple[Any, str, torch.nn.ModuleList] | None:
    """The model's stack of repeated layers (the longest ModuleList of one module type): its
    parent, its attribute name and the list; None where there is none (an ONNX engine)."""
    found = None
    if isinstance(model, torch.nn.Module):
        for parent in model.modules():
            for name, child in parent.named_children():
                if (
                    isinstance(child, torch.nn.ModuleList)
                    and len(child) > 1
                    and len({type(m) for m in child}) == 1
                    and (found is None or len(child) > len(found[2]))
                ):
                    found = (parent, name, child)
    return found


@contextmanager
def first_layers(embedder: Embedder, layers: int | None) -> Iterator[float]:
    """Run only the first `layers` of the loaded torch model's layers (None: all of them);
    yields the factor that scales a timing to the whole model."""
    found = _blocks(getattr(embedder, "model", None)) if layers else None
    if found is None or layers is None or len(found[2]) <= layers:
        yield 1.0
        return
    parent, name, blocks = found
    config: Any = getattr(parent, "config", None)
    configured = getattr(config, "num_hidden_layers", None)
    setattr(parent, name, torch.nn.ModuleList(list(blocks)[:layers]))
    if configured == len(blocks):  # Qwen3 and others slice their layers by the config
        config.num_hidden_layers = layers
    try:
        yield len(blocks) / layers
    finally:
        setattr(parent, name, blocks)
        if configured == len(blocks):
            config.num_hidden_layers = configured


def activate(embedder: Embedder, state: dict[str, Any]) -> None:
    """Make a loaded engine the one that runs (the others stay loaded, in `state`s)."""
    for name, value in state.items():
        setattr(embedder, name, value)


def _pick(figures: Sequence[Figures], seconds: Callable[[Figures], float | None]) -> Figures:
    """The fastest by `seconds`, or the most accurate of those within CLOSE of it (a load burst
    on a shared machine moves timings by more than that; accuracy does not move)."""
    timed = [f for f in figures if seconds(f)]
    fastest = min(seconds(f) or math.inf for f in timed)
    close = [f for f in timed if (seconds(f) or math.inf) <= CLOSE * fastest]
    return max(close, key=lambda f: (f.min_cosine or 0, -(seconds(f) or math.inf)))


class _Bench:
    """One measuring run: the probe and the timed inputs, the figures so far, and the engines
    loaded within the bound (`pool`, by label) waiting to be timed (`untimed`) or kept."""

    def __init__(self, embedder: Embedder, threads: ThreadPoolExecutor) -> None:
        self.embedder = embedder
        self.threads = threads
        texts = [*PROBE_DOCUMENTS, *(embedder.prompt("query") + q for q in PROBE_QUERIES)]
        self.probe = embedder.tokenize(texts)
        self.docs = [_ids(embedder, DOC_TOKENS)] * 2
        self.query = _ids(embedder, QUERY_TOKENS)
        self.reference: np.ndarray | None = None
        self.figures: list[Figures] = []
        # loaded, within the bound, waiting to be timed or kept
        self.pool: dict[str, dict[str, Any]] = {}
        self.untimed: list[Figures] = []
        # an ONNX graph cannot be cut short: with one among the candidates all run whole
        self.layers: int | None = TIMED_LAYERS
        self.scaled = ""  # "4 of 28 layers", once a timing was scaled

    def run(self, ids: list[np.ndarray], batch_tokens: int) -> np.ndarray:
        workers = self.embedder.parallelism
        lanes = self.threads if workers > 1 else None
        return encode_ids(self.embedder, ids, batch_tokens, workers, lanes)

    def timed(self, ids: list[np.ndarray], batch_tokens: int) -> float:
        # Every token computed, on every engine alike: where the tokenizer reads the timed text
        # and the query instruction as the same tokens (all unknown words), the query would
        # else go through the instruction's cache, rebuilt inside the timing each time an
        # engine is switched in (25-36 ms of a 4-layer int8 query's 44-63 on a Zen 3)
        embedder, reuse = self.embedder, self.embedder.reuse_instruction
        embedder.reuse_instruction = False
        try:
            with first_layers(embedder, self.layers) as scale:
                begin = clock()
                self.run(ids, batch_tokens)
                seconds = clock() - begin
        finally:
            embedder.reuse_instruction = reuse
        if scale != 1.0 and self.layers:
            self.scaled = f"{self.layers} of {round(scale * self.layers)} layers"
        return seconds * scale

    def warm_up(self) -> None:
        """One untimed run of each timed shape: the first run of a shape on a fresh engine
        prepares its kernels (oneDNN's for bf16) and faults its weights in, up to 2x slower."""
        self.timed(self.docs, 2 * DOC_TOKENS)
        self.timed([self.query], QUERY_TOKENS)

    def time_pool(self) -> None:
        """Time every engine waiting in the pool, interleaved; then keep the fastest for
        documents and for queries loaded, drop the others."""
        untimed, pool = self.untimed, self.pool
        if not untimed:
            return
        doc_runs: dict[str, list[float]] = {f.engine: [] for f in untimed}
        query_runs: dict[str, list[float]] = {f.engine: [] for f in untimed}
        for one in untimed:
            activate(self.embedder, pool[one.engine])
            self.warm_up()
        for _ in range(DOC_RUNS):
            for one in untimed:
                activate(self.embedder, pool[one.engine])
                doc_runs[one.engine].append(self.timed(self.docs, 2 * DOC_TOKENS))
        for _ in range(QUERY_RUNS):
            for one in untimed:
                activate(self.embedder, pool[one.engine])
                query_runs[one.engine].append(self.timed([self.query], QUERY_TOKENS))
        for one in untimed:
            one.document_batch_s = min(doc_runs[one.engine])
            one.query_s = min(query_runs[one.engine])
        untimed.clear()
        keep = {
            _pick(self.figures, lambda f: f.document_batch_s).engine,
            _pick(self.figures, lambda f: f.query_s).engine,
        }
        for name in list(pool):
            if name not in keep:
                del pool[name]

    def _held(self) -> float:
        return sum(f.size_mb or 0 for f in self.figures if f.engine in self.pool)

    def _make_room(self, engine: Engine) -> None:
        """Time (and thin) the pool when `engine` would not fit beside it in ROOM times what
        fp32 took alone; empty it when even that leaves no room."""
        fp32_mb = self.figures[0].size_mb or 0
        need = _SIZE[engine[1]] * fp32_mb
        if self._held() + need > ROOM * fp32_mb:
            self.time_pool()
        if self._held() + need > ROOM * fp32_mb:
            self.pool.clear()  # no room even for the fastest so far: loaded again if it wins
        gc.collect()

    def _load(self, engine: Engine) -> None:
        embedder = self.embedder
        loaded = label((embedder.backend, embedder.dtype)) if self.figures else None
        in_place = engine == ("torch", "int8") and loaded == "torch fp32"
        if self.figures and not in_place:
            self._make_room(engine)
        if in_place:
            embedder.quantize_in_place()  # from the fp32 weights in memory: no second load
        else:
            embedder.load_engine(*engine)

    def add(self, engine: Engine, reference: bool) -> None:
        """Load `engine` and check its vectors of the probe texts against the reference's;
        within the bound, time it now (the reference: alone, then gone) or pool it."""
        self._load(engine)
        one = Figures(label(engine), size_mb=round(self.embedder.size_bytes() / 2**20, 1))
        self.figures.append(one)
        vectors = self.run(self.probe, 2 * DOC_TOKENS)  # also the engine's warm-up
        if self.reference is None:
            self.reference = vectors
        one.min_cosine = float(np.sum(self.reference * vectors, axis=1).min())
        if one.min_cosine < BOUND:
            one.note = f"lowest cosine to fp32 below {BOUND}: not timed"
            return
        if reference:  # the reference: timed alone, then gone
            self.warm_up()
            one.document_batch_s = min(
                self.timed(self.docs, 2 * DOC_TOKENS) for _ in range(DOC_RUNS)
            )
            one.query_s = min(self.timed([self.query], QUERY_TOKENS) for _ in range(QUERY_RUNS))
            return
        self.pool[one.engine] = {
            name: getattr(self.embedder, name) for name in self.embedder._ENGINE
        }
        self.untimed.append(one)


def _run_chosen(
    embedder: Embedder, figures: Sequence[Figures], pool: dict[str, dict[str, Any]]
) -> tuple[str, str, dict[str, dict[str, Any]]]:
    """Run the documents' engine; the queries' engine and those kept loaded for it."""
    documents = _pick(figures, lambda f: f.document_batch_s).engine
    queries = _pick(figures, lambda f: f.query_s).engine
    if documents in pool:
        activate(embedder, pool[documents])
    else:
        embedder.load_engine(*parse(documents))
    kept = {name: state for name, state in pool.items() if name == queries and name != documents}
    pool.clear()
    gc.collect()
    return documents, queries, kept


def measure(
    embedder: Embedder, engines: Sequence[Engine], key: dict[str, Any]
) -> tuple[Decision, dict[str, dict[str, Any]]]:
    """Run every candidate (see embed_server.autotune's docstring). torch fp32 is timed first,
    alone, then becomes int8 in place; the others are timed in interleaved rounds (A B A B: a
    burst of load from elsewhere hits each alike) as many at once as fit in what fp32 took
    alone. Leaves the documents' engine running; returns the decision and the engines still
    loaded (by label)."""
    started = time.monotonic()
    with ThreadPoolExecutor(max(1, MAX_SIDE_BY_SIDE - 1), thread_name_prefix="auto") as threads:
        bench = _Bench(embedder, threads)
        if any(backend != "torch" for backend, _ in engines):
            bench.layers = None
        for engine in engines:
            bench.add(engine, reference=engine == engines[0])
        bench.time_pool()
    documents, queries, kept = _run_chosen(embedder, bench.figures, bench.pool)
    decision = Decision(
        documents=documents,
        queries=queries,
        figures=bench.figures,
        seconds=time.monotonic() - started,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        key=key,
        timed_on=bench.scaled,
    )
    return decision, kept
