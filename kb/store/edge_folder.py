"""The files of embedded storage (kb.store.edge) beside its shards, under QDRANT_PATH/edge/:
each collection's lock and `collection.json` (its vectors and our metadata: a shard keeps none,
written from and read back into qdrant-client's models), and `aliases.json`. Every file is
replaced whole (atomic) and owner-only.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from kb.core.errors import StoreError
from kb.core.state import PRIVATE_FILE
from kb.store import translate
from kb.store.engine import StoredCollection
from kb.store.models import models

EDGE_DIR = "edge"  # under QDRANT_PATH; qdrant-client's local mode used `collection/`
META_FILE = "collection.json"
ALIASES_FILE = "aliases.json"  # {alias: collection}, replaced whole (atomic) at each change
SHARD_DIR = "shard"


class CollectionBusy(StoreError):
    """Another process holds this collection's shard."""


def hold(root: Path, name: str) -> int:
    """The file descriptor of collection `name`'s lock, held for this process (closing it
    releases the flock); CollectionBusy when another process holds it."""
    fd = os.open(root / f"{name}.lock", os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise CollectionBusy(f"collection '{name}' is open in another process") from None
    return fd


def load_aliases(root: Path) -> dict[str, str]:
    try:
        found = json.loads((root / ALIASES_FILE).read_text("utf-8"))
    except FileNotFoundError:
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def write_aliases(root: Path, aliases: dict[str, str]) -> None:
    target = root / ALIASES_FILE
    tmp = target.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(aliases, indent=1))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, target)  # atomic: every later call sees the old or the new names


def read_meta(folder: Path) -> dict[str, Any]:
    """A collection's `collection.json`, from its folder."""
    result: dict[str, Any] = json.loads((folder / META_FILE).read_text("utf-8"))
    return result


def write_meta(folder: Path, meta: dict[str, Any]) -> None:
    target = folder / META_FILE
    tmp = target.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(meta, indent=1))
    os.replace(tmp, target)  # atomic: a crash leaves the old or the new file


def new_meta(
    dense: Mapping[str, models.VectorParams],
    sparse: Mapping[str, models.SparseVectorParams],
    metadata: Mapping[str, Any],
) -> dict[str, Any]:
    """What `collection.json` holds of a collection created with these vectors."""
    return {
        "vectors": {
            k: {"size": v.size, "distance": str(v.distance.value)} for k, v in dense.items()
        },
        "sparse_vectors": {
            k: {"idf": v.modifier == models.Modifier.IDF} for k, v in sparse.items()
        },
        "metadata": dict(metadata),
    }


def edge_config(
    dense: Mapping[str, models.VectorParams],
    sparse: Mapping[str, models.SparseVectorParams],
    optimizers: qe.EdgeOptimizersConfig | None,
    quantization: qe.ScalarQuantizationConfig | None,
) -> qe.EdgeConfig:
    """A new shard's configuration: these vectors, and these qdrant-edge settings if given."""
    return qe.EdgeConfig(
        vectors={
            k: qe.EdgeVectorParams(size=v.size, distance=translate.DISTANCES[v.distance])
            for k, v in dense.items()
        },
        sparse_vectors={
            k: qe.EdgeSparseVectorParams(
                modifier=qe.Modifier.Idf if v.modifier == models.Modifier.IDF else None
            )
            for k, v in sparse.items()
        },
        optimizers=optimizers,
        quantization_config=quantization,
    )


def stored(meta: Mapping[str, Any], info: qe.ShardInfo) -> StoredCollection:
    """A collection as `describe` reports it: its `collection.json` and its shard's info."""
    return StoredCollection(
        dense={
            k: models.VectorParams(size=v["size"], distance=models.Distance(v["distance"]))
            for k, v in meta["vectors"].items()
        },
        sparse={
            k: models.SparseVectorParams(modifier=models.Modifier.IDF if v["idf"] else None)
            for k, v in meta["sparse_vectors"].items()
        },
        metadata=dict(meta["metadata"]),
        points=info.points_count,
        segments=info.segments_count,
        indexed_vectors=info.indexed_vectors_count,
    )
