"""The torch threads a CPU forward pass runs on (the embedder's and the reranker's passes).

A pass gets its share of EMBED_THREADS: all of them alone, half each when two micro-batches run
side by side (batching.Engine). A small pass (a query: up to SMALL_PASS_TOKENS padded tokens)
alone gains from every thread while the cores are free (a 20-token query on the Qwen3-0.6B shape,
int8, native 2-core Zen 4: 73-96 ms on two threads, 104-157 ms on one), but while another process
holds a core each of its many short ops waits at the threads' barrier for the one descheduled
(the same query 210-660 ms on two, 108-142 ms on one). So each small pass on more than one
thread measures the CPU it got: the process's CPU time over the pass's wall time x threads,
0.97-1.01 on idle cores and 0.47-0.75 with one or two taken. After STRIKES such passes in a row
below SHARE_FLOOR, small passes run on one thread for a cool-down, which doubles each time the
next try on every thread finds a core still taken (COOL_DOWN_S up to MAX_COOL_DOWN_S) and
starts again from the first once a try gets its cores. Under a lasting load, then, one query in
a growing while pays the slow try.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

log = logging.getLogger("embedder.threads")

SMALL_PASS_TOKENS = 128  # padded tokens: one query, or a few short texts
# Micro-batches run side by side on CPU (batching.Engine). More than two Python threads driving
# eager torch ops would contend for the GIL; two already keep the ops free of per-op barriers.
MAX_SIDE_BY_SIDE = 2
SHARE_FLOOR = 0.85  # between the measured 0.97 (cores free) and 0.75 (a core taken)
# Passes in a row below the floor before the cool-down: one alone is too often a stray dip on
# a shared host (0.74 once in 30 idle passes)
STRIKES = 2
COOL_DOWN_S = 30.0
MAX_COOL_DOWN_S = 900.0
# A shorter pass says little about the cores (a tiny model's query; a scheduler tick is ~4 ms)
MIN_JUDGED_S = 0.02

_LOCK = threading.Lock()  # torch.set_num_threads also resets process-wide state
_WIDE: ThreadPoolExecutor | None = None
T = TypeVar("T")


def run_wide(work: Callable[[], T]) -> T:
    """`work()` on the process's wide lane: one thread on which every multi-threaded torch pass
    of the embedder and the reranker runs (models load on one thread: model.Embedder). libgomp
    (torch's OpenMP) keeps a pool of worker threads for each thread that ever ran an op on
    several threads, and once the pools hold more threads than there are CPUs, every barrier
    sleeps instead of spinning: a 20-token query on two threads took 2x as long (CPU share
    0.45-0.58) from a second thread.
    Thread-local state (torch.inference_mode, the thread count) is set inside `work`."""
    global _WIDE
    with _LOCK:
        if _WIDE is None:
            _WIDE = ThreadPoolExecutor(1, thread_name_prefix="torch-wide")
        lane = _WIDE
    if threading.current_thread().name.startswith("torch-wide"):
        return work()  # from the lane itself: submitting would wait on itself
    return lane.submit(work).result()


def set_threads(threads: int) -> None:
    """The calling thread's torch threads (each Python thread keeps its own setting)."""
    if torch.get_num_threads() != threads:
        with _LOCK:
            torch.set_num_threads(threads)


class PassThreads:
    """Threads per forward pass for one model's passes, with the cool-down above. Safe to call
    from the threads an engine runs micro-batches on."""

    def __init__(
        self,
        threads: int,
        what: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        cpu_time: Callable[[], float] = time.process_time,
    ) -> None:
        self.threads = threads
        self.what = what  # "embedder" or "reranker", for the log
        self._clock = clock
        self._cpu_time = cpu_time
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Forget what earlier passes found (as at start)."""
        self._narrow_until = 0.0  # clock time until which small passes run on one thread
        self._cool_down = COOL_DOWN_S
        self._strikes = 0  # small passes in a row below SHARE_FLOOR
        self._told = False  # the narrowing was said at INFO once
        self.last_share: float | None = None  # the last judged pass's CPU share

    def wanted(self, tokens: int, side_by_side: int = 1) -> int:
        """Threads for a pass of `tokens` padded tokens, `side_by_side` passes running at once
        (this one included)."""
        share = max(1, self.threads // side_by_side)
        if tokens <= SMALL_PASS_TOKENS and self._clock() < self._narrow_until:
            return 1
        return share

    def run(self, forward: Callable[[], T], tokens: int, side_by_side: int = 1) -> T:
        """`forward()` (one pass of `tokens` padded tokens, `side_by_side` passes running at
        once) on the threads it gets: a pass on more than one thread alone runs on the wide lane
        (`run_wide`) and, if small, is judged by its CPU share (above)."""
        threads = self.wanted(tokens, side_by_side)
        if threads == 1 or side_by_side > 1:  # side by side: each on its own caller's thread
            set_threads(threads)
            return forward()
        judged = tokens <= SMALL_PASS_TOKENS

        def timed() -> T:
            set_threads(threads)
            wall, cpu = self._clock(), self._cpu_time()
            out = forward()
            if judged:
                self._judge(self._clock() - wall, self._cpu_time() - cpu, threads)
            return out

        return run_wide(timed)

    def _judge(self, wall: float, cpu: float, threads: int) -> None:
        if wall < MIN_JUDGED_S:
            return
        share = cpu / (wall * threads)
        with self._lock:
            self.last_share = share
            if share >= SHARE_FLOOR:
                self._strikes = 0
                self._cool_down = COOL_DOWN_S
                return
            self._strikes += 1
            if self._strikes < STRIKES:
                return
            self._narrow_until = self._clock() + self._cool_down
            # said once at INFO; each later narrowing (doubling cool-downs) only at DEBUG
            log.log(
                logging.DEBUG if self._told else logging.INFO,
                "%s: small passes on %d threads got %.2f of them (another process holds a "
                "core): they run on one thread for %.0f s",
                self.what, threads, share, self._cool_down,
            )  # fmt: skip
            self._told = True
            self._cool_down = min(2 * self._cool_down, MAX_COOL_DOWN_S)
            self._strikes = STRIKES - 1  # the next try after the cool-down decides alone

    def state(self) -> dict[str, object]:
        """For /health: threads a small pass runs on now, and why."""
        left = self._narrow_until - self._clock()
        return {
            "small_pass_threads": 1 if left > 0 else self.threads,
            "one_thread_for_s": round(left, 1) if left > 0 else 0,
            "last_cpu_share": None if self.last_share is None else round(self.last_share, 2),
        }
