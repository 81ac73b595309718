"""Carry a collection from qdrant-client's local mode (what QDRANT_PATH held before embedded
storage ran on Qdrant's engine, kb.store.edge) over to the engine: its vectors, payloads (soft
deletes included) and metadata are copied as they are, so no note is embedded again.

An explicit step (`Store.carry_over`), never part of opening a store: the app calls it once per
open of embedded storage (kb.app.backend.open_store, make local's start). It copies only when
the engine does not hold the collection yet and the folder holds it in local mode's layout
(`collection/<name>/storage.sqlite`). The old files stay where they were (the message says they
can be deleted); the user is told once, since afterwards the engine holds the collection.
Local mode is read through the server engine's adapter: qdrant-client answers alike in both.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kb.core.schema import PAYLOAD_INDEXES
from kb.store.engine import ClusterLayout, Engine
from kb.store.models import models

if TYPE_CHECKING:
    from kb.store.server import ServerEngine

log = logging.getLogger(__name__)
BATCH = 512  # points per read and per write


def local_collection(folder: Path, name: str) -> Path | None:
    """The local-mode files of collection `name` under QDRANT_PATH, if any."""
    found = folder / "collection" / name
    return found if (found / "storage.sqlite").is_file() else None


def local_mode(folder: Path) -> ServerEngine:
    """qdrant-client's local mode over `folder` as an engine: what the carry-over reads (and
    what tests and bench/scale.py write as an older version did). Through the server engine's
    adapter: qdrant-client answers alike in-process and over HTTP. No longer a runtime engine
    (it scores every point in Python: seconds a search at 10,000 chunks)."""
    from qdrant_client import QdrantClient  # loaded only here: a one-time copy

    from kb.store.server import ServerEngine

    return ServerEngine(QdrantClient(path=str(folder)), f"qdrant-client's local mode in {folder}")


def from_local_mode(engine: Engine, name: str) -> int | None:
    """Copy collection `name` from local mode into `engine` (embedded storage) when only local
    mode holds it; the number of points copied, or None when there was nothing to do."""
    old = local_collection(engine.folder, name) if engine.folder is not None else None
    if engine.folder is None or old is None or engine.exists(name):
        return None
    started = time.monotonic()
    source = local_mode(engine.folder)
    try:
        copied = _copy(source, engine, name)
    finally:
        source.close()
    if copied is None:
        return None
    log.warning(
        "embedded storage now runs on Qdrant's engine: copied collection '%s' (%d points, "
        "no embedding) from the old format in %.1f s; %s can be deleted",
        name,
        copied,
        time.monotonic() - started,
        old,
    )
    return copied


def _copy(source: Engine, target: Engine, name: str) -> int | None:
    found = source.describe(name)
    if not found.dense:
        return None  # not made by this project: leave it to `ingest.py --rebuild`
    target.create(
        name,
        dense=found.dense,
        sparse=found.sparse,
        metadata={**found.metadata, "rebuild_incomplete": True},
        cluster=ClusterLayout(),
    )
    for field, kind in PAYLOAD_INDEXES.items():
        target.create_index(name, field, models.PayloadSchemaType(kind))
    copied = 0
    offset: str | None = None
    while True:
        records, offset = source.scroll(name, None, limit=BATCH, offset=offset, vectors=True)
        points = [
            models.PointStruct(id=r.id, vector=dict(r.vectors), payload=r.payload) for r in records
        ]
        target.upsert(name, points)
        copied += len(points)
        if offset is None:
            break
    # as it was only now: an interrupted copy is finished by the next ingest (a full build)
    was_incomplete = found.metadata.get("rebuild_incomplete") is True
    target.update_metadata(name, {"rebuild_incomplete": was_incomplete})
    return copied
