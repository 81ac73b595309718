"""One encoder thread fed by a bounded queue: dynamic batching under a padded-token budget.

Requests submit jobs; the worker takes every job waiting (up to a round of `max_round_inputs`
texts), sorts all their texts by token length, runs micro-batches whose padded size
(batch size x longest input) stays under `batch_tokens`, and hands each job its vectors in input
order. Sorting removes padding waste; merging concurrent requests keeps batches full; one encode
at a time keeps memory bounded by the token budget whatever the request size.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

log = logging.getLogger("embedder.batching")


class Encoder(Protocol):
    dimensions: int

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]: ...

    def embed_ids(self, batch: Sequence[np.ndarray]) -> np.ndarray: ...


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


class Engine:
    def __init__(
        self, encoder: Encoder, *, batch_tokens: int, queue_size: int, max_round_inputs: int
    ) -> None:
        self.encoder = encoder
        self.batch_tokens = batch_tokens
        self.max_round_inputs = max_round_inputs
        self.rounds = 0  # encode rounds run (tests observe that concurrent jobs were merged)
        self._queue: queue.Queue[Job | None] = queue.Queue(maxsize=queue_size)
        self._thread = threading.Thread(target=self._run, name="encoder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            try:
                self._queue.put(None, timeout=timeout)
            except queue.Full:
                return  # daemon thread: it ends with the process
            self._thread.join(timeout)

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
            vectors = np.empty((len(texts), self.encoder.dimensions), dtype=np.float32)
            for batch in plan_batches(lengths, self.batch_tokens):
                vectors[batch] = self.encoder.embed_ids([ids[i] for i in batch])
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
