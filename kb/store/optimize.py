"""Embedded storage's search index, built at the end of an ingest (ingest.py), never on a search.

Qdrant's engine in-process (kb.store.edge) writes new points into plain segments that every search
scans exhaustively: at 100,000 chunks of 1024 dimensions that scan alone takes tens of ms. A
Qdrant server then merges segments and builds the HNSW index in the background; the in-process
engine does it only when told (`optimize()`), blocking, with Python's interpreter lock held
(a server process would stop answering meanwhile). So the process that ingests does it, once
its writes are done: the engine plans the work itself (a segment under its indexing threshold,
10 MB of vectors, stays plain), so after a run that wrote little it returns at once.

The MCP server does not: an ingest it runs for ingest.py (kb.app.remote) or its watcher leaves
the segments as written; `make local` (kb.app.local_stack) builds what they left at its next start,
before the server opens the folder, and so does the next `ingest.py` run without a server.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from kb.store.points import Store

log = logging.getLogger(__name__)

# chunks written by a run from which building the index is announced first (it takes minutes
# at 100,000 chunks); below this the engine usually has little or nothing to do
ANNOUNCE_CHUNKS = 2_000


def after_ingest(
    store: Store,
    names: Sequence[str],
    *,
    written: int,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, float]:
    """Optimize collections `names` (the store's and those beside it) of embedded storage on
    Qdrant's engine; {name: seconds} of those the engine changed. A server: {}."""
    if not store.embedded:
        return {}
    done: dict[str, float] = {}
    for name in dict.fromkeys(names):
        target = store if name == store.collection else store.beside(name)
        if not target.exists():
            continue  # never created (no code notes, say)
        if written >= ANNOUNCE_CHUNKS:
            say(f"building the search index of {name} ({written} chunks written; blocking)")
        started = time.monotonic()
        if target.optimize():
            done[name] = time.monotonic() - started
            log.info("optimized embedded collection %s in %.1fs", name, done[name])
            say(f"optimized the search index of {name} in {done[name]:.1f}s")
    return done
