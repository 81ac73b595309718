"""One encoder thread fed by a bounded queue: dynamic batching under a padded-token budget.

Requests submit jobs; the engine takes every job waiting (up to a round of `max_round_inputs`
texts), sorts all their texts by token length, cuts them into micro-batches and hands each job its
vectors in input order. Sorting removes padding waste; merging concurrent requests keeps batches
full.

Micro-batches run in waves: up to `encoder.parallelism` of them side by side, at most
`batch_tokens` padded tokens per wave in all, so memory stays bounded whatever the request size
and core count. On CPU two batches side by side, sharing the threads, beat one batch on all of
them: small ops on several threads wait for each other at every step, badly so when another
process holds a core (Qwen3-0.6B shape, bf16, 2 shared cores: 2.4-2.8 vs 1.7-2.1 chunks/s in
bench/embed_throughput.py). A wave of one batch (a lone short request) gets every thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from embed_server.errors import ModelLoadError

log = logging.getLogger("embedder.batching")


class Encoder(Protocol):
    dimensions: int
    dtype: str  # precision in use: fp32, bf16 or int8
    parallelism: int  # micro-batches it runs side by side (1 on a GPU)

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]: ...

    # side_by_side: micro-batches running at once, this one included (they share the threads)
    def embed_ids(self, batch: Sequence[np.ndarray], side_by_side: int = 1) -> np.ndarray: ...


@dataclass
class Result:
    vectors: np.ndarray  # (len(texts), dimensions) float32, unit length, input order
    token_counts: list[int]  # tokens embedded per text, after truncation


@dataclass
class Job:
    texts: list[str]
    future: Future[Result] = field(default_factory=Future)


class QueueFull(Exception):
    """More requests are waiting than the queue holds."""


def plan_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Indices grouped longest first so that len(batch) x longest <= batch_tokens.

    An input longer than the budget on its own still gets a batch of one.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        # Sorted descending: the first index of a batch is its longest input.
        if current and (len(current) + 1) * lengths[current[0]] > batch_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def plan_waves(lengths: Sequence[int], batch_tokens: int, workers: int) -> list[list[list[int]]]:
    """Micro-batches grouped into waves that run in parallel.

    Each micro-batch is planned under `batch_tokens // workers` padded tokens (longest first, see
    `plan_batches`); a wave holds at most `workers` of them and `batch_tokens` padded tokens in
    all. An input longer than the budget still gets a batch (and a wave) of its own.
    """
    waves: list[list[list[int]]] = []
    current: list[list[int]] = []
    used = 0
    for batch in plan_batches(lengths, max(1, batch_tokens // workers)):
        cost = len(batch) * lengths[batch[0]]
        if current and (len(current) == workers or used + cost > batch_tokens):
            waves.append(current)
            current, used = [], 0
        current.append(batch)
        used += cost
    if current:
        waves.append(current)
    return waves


class Engine:
    def __init__(
        self, encoder: Encoder, *, batch_tokens: int, queue_size: int, max_round_inputs: int
    ) -> None:
        self.encoder = encoder
        self.batch_tokens = batch_tokens
        self.max_round_inputs = max_round_inputs
        self.workers = max(1, encoder.parallelism)
        self.rounds = 0  # encode rounds run (tests observe that concurrent jobs were merged)
        self._queue: queue.Queue[Job | None] = queue.Queue(maxsize=queue_size)
        self._thread = threading.Thread(target=self._run, name="encoder", daemon=True)
        # The engine thread runs one batch of each wave itself; these run the others.
        self._pool = (
            ThreadPoolExecutor(self.workers - 1, thread_name_prefix="encoder-worker")
            if self.workers > 1
            else None
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            try:
                self._queue.put(None, timeout=timeout)
            except queue.Full:
                return  # daemon thread: it ends with the process
            self._thread.join(timeout)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def submit(self, texts: list[str]) -> Future[Result]:
        job = Job(texts)
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            raise QueueFull from None
        return job.future

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            jobs, inputs = [first], len(first.texts)
            stop = False
            while inputs < self.max_round_inputs:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stop = True
                    break
                jobs.append(job)
                inputs += len(job.texts)
            self._encode_round([j for j in jobs if j.future.set_running_or_notify_cancel()])
            if stop:
                return

    def _encode_round(self, jobs: list[Job]) -> None:
        if not jobs:
            return
        started = time.perf_counter()
        try:
            texts = [text for job in jobs for text in job.texts]
            ids = self.encoder.tokenize(texts)
            lengths = [len(x) for x in ids]
            vectors = encode_ids(self.encoder, ids, self.batch_tokens, self.workers, self._pool)
        except BaseException as exc:  # every waiting request must hear about it
            for job in jobs:
                job.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        self.rounds += 1
        start = 0
        for job in jobs:
            end = start + len(job.texts)
            job.future.set_result(Result(vectors[start:end], lengths[start:end]))
            start = end
        log.debug(
            "round: %d requests, %d inputs, %d tokens, %.0f ms",
            len(jobs),
            len(texts),
            sum(lengths),
            1000 * (time.perf_counter() - started),
        )


def encode_ids(
    encoder: Encoder,
    ids: list[np.ndarray],
    batch_tokens: int,
    workers: int,
    pool: ThreadPoolExecutor | None,
) -> np.ndarray:
    """Vectors of `ids` in input order, run in waves as the engine runs them (`plan_waves`): the
    calling thread runs one micro-batch of each wave, `pool` (workers - 1 threads) the others."""
    parts: list[tuple[list[int], np.ndarray]] = []
    lengths = [len(x) for x in ids]
    for wave in plan_waves(lengths, batch_tokens, workers if pool is not None else 1):
        n = len(wave)
        others = [
            (batch, pool.submit(encoder.embed_ids, [ids[i] for i in batch], n))
            for batch in wave[1:]
            if pool is not None
        ]
        try:
            parts.append((wave[0], encoder.embed_ids([ids[i] for i in wave[0]], n)))
        finally:  # a failed round must not leave workers running into the next one
            wait([future for _, future in others])
        parts += [(batch, future.result()) for batch, future in others]
    vectors = np.empty((len(ids), parts[0][1].shape[1] if parts else 0), dtype=np.float32)
    for batch, part in parts:
        vectors[batch] = part
    return vectors


def start_engine(
    load: Callable[[], Any], what: str, *, batch_tokens: int, queue_size: int, max_round_inputs: int
) -> tuple[Any, Engine]:
    """Load a model (the embedder's or the reranker's) and start its engine. Every failure is a
    ModelLoadError whose message the service reports (an unexpected one logged with its
    traceback, the user told to read the log)."""
    started = time.perf_counter()
    try:
        model = load()
        engine = Engine(
            model, batch_tokens=batch_tokens, queue_size=queue_size,
            max_round_inputs=max_round_inputs,
        )  # fmt: skip
        engine.start()
    except ModelLoadError as exc:
        log.error("%s load failed: %s", what, exc)
        raise
    except Exception as exc:
        log.exception("%s load failed", what)
        raise ModelLoadError(
            f"{what} failed to load ({type(exc).__name__}); see the embedder log"
        ) from exc
    log.info("%s ready in %.1f s", what, time.perf_counter() - started)
    return model, engine
