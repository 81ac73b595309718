"""Carry a collection from qdrant-client's local mode (what QDRANT_PATH held before embedded
storage ran on Qdrant's engine, kb.store.edge) over to the engine: its vectors, payloads (soft
deletes included) and metadata are copied as they are, so no note is embedded again.

Runs once, when a store opens a collection the engine does not hold yet and the folder holds it
in local mode's layout (`collection/<name>/storage.sqlite`). The old files stay where they were
(the message says they can be deleted); the user is told once, since afterwards the engine holds
the collection.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kb.core.schema import PAYLOAD_INDEXES

if TYPE_CHECKING:
    from kb.store.points import Store

log = logging.getLogger(__name__)
BATCH = 512  # points per read and per write


def local_collection(folder: Path, name: str) -> Path | None:
    """The local-mode files of collection `name` under QDRANT_PATH, if any."""
    found = folder / "collection" / name
    return found if (found / "storage.sqlite").is_file() else None


def migrate_if_needed(store: Store, folder: Path) -> int | None:
    """Copy collection `store.collection` from local mode into the engine when only local mode
    holds it; the number of points copied, or None when there was nothing to do."""
    old = local_collection(folder, store.collection)
    if old is None or store.client.collection_exists(store.collection):
        return None
    from qdrant_client import QdrantClient, models  # local mode: only for this one-time copy

    started = time.monotonic()
    source = QdrantClient(path=str(folder))
    try:
        info = source.get_collection(store.collection)
        vectors = info.config.params.vectors
        if not isinstance(vectors, dict):
            return None  # not made by this project: leave it to `ingest.py --rebuild`
        with store.calls():
            store.client.create_collection(
                store.collection,
                vectors_config=vectors,
                sparse_vectors_config=info.config.params.sparse_vectors or {},
                metadata={**(info.config.metadata or {}), "rebuild_incomplete": True},
            )
            for field, schema in PAYLOAD_INDEXES.items():
                store.client.create_payload_index(store.collection, field, field_schema=schema)
        copied = 0
        offset = None
        while True:
            records, offset = source.scroll(
                store.collection, limit=BATCH, offset=offset, with_payload=True, with_vectors=True
            )
            points = [
                models.PointStruct(id=r.id, vector=r.vector or {}, payload=r.payload or {})
                for r in records
            ]
            with store.calls():
                store.client.upsert(store.collection, points=points, wait=True)
            copied += len(points)
            if offset is None:
                break
        was_incomplete = (info.config.metadata or {}).get("rebuild_incomplete") is True
        # as it was only now: an interrupted copy is finished by the next ingest (a full build)
        with store.calls():
            store.client.update_collection(
                store.collection,
                metadata={"rebuild_incomplete": was_incomplete},
            )
    finally:
        source.close()
    log.warning(
        "embedded storage now runs on Qdrant's engine: copied collection '%s' (%d points, "
        "no embedding) from the old format in %.1f s; %s can be deleted",
        store.collection,
        copied,
        time.monotonic() - started,
        old,
    )
    return copied
