"""Embedded storage on Qdrant's own engine in-process (qdrant-edge) as an Engine
(kb.store.engine): what a server answers, answered in this process.

Layout under QDRANT_PATH: `edge/<collection>/shard/` (one qdrant-edge shard per collection),
`edge/<collection>/collection.json` (its vectors and our metadata: a shard keeps none) and
`edge/<collection>.lock` (one process per collection: a shard refuses a second open anyway,
the lock makes that a clear message). `edge/aliases.json` names collections by alias as a
server's aliases do (kb.ingest.switch points the searched name at a rebuilt index): every call
taking a collection's name resolves an alias first, except create and drop (real collections
only, as on a server); an alias may take the name of a collection that still exists (an index
made before aliases), which makes the switch from it atomic here too. Requests arrive as
qdrant-client models and are translated by kb.store.translate. A shard has no grouped query:
`query_groups` ranks one query as deep as a server's grouped query would and keeps the best
points of each group itself. kb.store.edge_folder reads and writes the files beside the shards.

`optimize()` (building HNSW and merging segments) blocks, interpreter lock held, for up to
minutes: kb.store.optimize runs it after ingest.py's writes and before make local's server starts,
never on a search.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import qdrant_edge as qe

from kb.core.errors import StoreError, StoreUnavailable
from kb.core.state import private_folder
from kb.store import translate
from kb.store.edge_folder import (
    EDGE_DIR,
    META_FILE,
    SHARD_DIR,
    CollectionBusy,
    edge_config,
    hold,
    load_aliases,
    new_meta,
    read_meta,
    stored,
    write_aliases,
    write_meta,
)
from kb.store.engine import (
    ClusterLayout,
    Fields,
    Record,
    Scored,
    StoredCollection,
    best_per_group,
    wanted_payload,
)
from kb.store.models import models
from kb.store.query import PREFETCH_FACTOR, ungrouped

if TYPE_CHECKING:
    from kb.store.points import Store


class EdgeEngine:
    """A QDRANT_PATH folder of qdrant-edge shards, one per collection, opened on first use and
    locked for this process until `close`. One shard object serves every thread of a server:
    each call holds the engine's lock.

    `optimizers`, `quantization`: more qdrant-edge settings for a collection this engine
    creates (no setting selects them: `tuned_store`, for benchmarks and tests)."""

    def __init__(
        self,
        path: str | Path,
        *,
        optimizers: qe.EdgeOptimizersConfig | None = None,
        quantization: qe.ScalarQuantizationConfig | None = None,
    ) -> None:
        self.folder = private_folder(Path(path))  # note text inside: the user's alone
        self.location = f"embedded Qdrant in {self.folder} (QDRANT_PATH)"
        self.root = private_folder(self.folder / EDGE_DIR)
        self._tuning = (optimizers, quantization)
        self._shards: dict[str, qe.EdgeShard] = {}
        self._locks: dict[str, int] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._mutex = threading.RLock()
        self._written: set[str] = set()  # collections this process changed: flushed on close
        self._aliases: dict[str, str] = load_aliases(self.root)
        self.shadowing_aliases = True  # an alias may take the name of an existing collection

    # --- aliases ------------------------------------------------------------------------

    def _resolve(self, name: str) -> str:
        return self._aliases.get(name, name)

    def aliases(self) -> dict[str, str]:
        with self._mutex:
            return dict(self._aliases)

    def point_alias(self, alias: str, target: str) -> str | None:
        """One replace of the aliases file: an alias may shadow a collection of its name."""
        with self._mutex:
            if not (self.root / target / META_FILE).is_file():
                raise StoreError(f"collection '{target}' does not exist in {self.location}")
            before = self._aliases.get(alias)
            if before is None and (self.root / alias / META_FILE).is_file():
                before = alias
            self._write_aliases({**self._aliases, alias: target})
            return before

    def drop_alias(self, alias: str) -> None:
        with self._mutex:
            self._write_aliases({a: c for a, c in self._aliases.items() if a != alias})

    def _write_aliases(self, aliases: dict[str, str]) -> None:
        write_aliases(self.root, aliases)
        self._aliases = aliases

    @classmethod
    def open(
        cls,
        path: str | Path,
        collection: str,
        *,
        optimizers: qe.EdgeOptimizersConfig | None = None,
        quantization: qe.ScalarQuantizationConfig | None = None,
    ) -> EdgeEngine:
        """The folder, with `collection` held for this process; StoreUnavailable when another
        process holds it."""
        engine = cls(path, optimizers=optimizers, quantization=quantization)
        try:
            engine.lock(collection)
        except CollectionBusy:
            engine.close()
            raise StoreUnavailable(
                f"{engine.location} is in use by another process (the MCP server or another "
                "ingest?); stop it first, or run Qdrant as a server and set QDRANT_URL"
            ) from None
        return engine

    # --- locking and opening ------------------------------------------------------------

    def lock(self, name: str) -> None:
        """Hold collection `name` (an alias: its collection) for this process; CollectionBusy
        when another holds it."""
        with self._mutex:
            self._hold(self._resolve(name))

    def _hold(self, name: str) -> None:
        if name not in self._locks:
            self._locks[name] = hold(self.root, name)

    def _dir(self, name: str) -> Path:
        return self.root / self._resolve(name)

    def _shard(self, name: str) -> qe.EdgeShard:
        with self._mutex:
            name = self._resolve(name)
            shard = self._shards.get(name)
            if shard is None:
                if not self.exists(name):
                    raise StoreError(f"collection '{name}' does not exist in {self.location}")
                self.lock(name)
                shard = qe.EdgeShard.load(str(self._dir(name) / SHARD_DIR))
                self._shards[name] = shard
            return shard

    def _read_meta(self, name: str) -> dict[str, Any]:
        with self._mutex:
            name = self._resolve(name)
            if name not in self._meta:
                self._meta[name] = read_meta(self._dir(name))
            return self._meta[name]

    def _write_meta(self, name: str, meta: dict[str, Any]) -> None:
        name = self._resolve(name)
        write_meta(self._dir(name), meta)
        self._meta[name] = meta

    def close(self) -> None:
        with self._mutex:
            for name, shard in self._shards.items():
                if name in self._written:  # a search-only process (query.py) skips the sync
                    shard.flush()
                shard.close()
            self._written.clear()
            self._shards.clear()
            for fd in self._locks.values():
                os.close(fd)  # releases the flock
            self._locks.clear()

    # --- collections --------------------------------------------------------------------

    def collection_names(self) -> list[str]:
        return sorted(p.parent.name for p in self.root.glob(f"*/{META_FILE}"))

    def exists(self, name: str) -> bool:
        return (self._dir(name) / META_FILE).is_file()

    def describe(self, name: str) -> StoredCollection:
        meta = self._read_meta(name)
        with self._mutex:
            info = self._shard(name).info()
        return stored(meta, info)

    def create(
        self,
        name: str,
        *,
        dense: Mapping[str, models.VectorParams],
        sparse: Mapping[str, models.SparseVectorParams],
        metadata: Mapping[str, Any],
        cluster: ClusterLayout,  # one shard in one process: nothing to spread
    ) -> None:
        with self._mutex:
            if name in self._aliases:
                raise StoreError(f"'{name}' is an alias of collection '{self._aliases[name]}'")
            self._hold(name)
            folder = self.root / name
            if folder.exists():
                raise StoreError(f"collection '{name}' already exists in {self.location}")
            config = edge_config(dense, sparse, *self._tuning)
            self._shards[name] = qe.EdgeShard.create(str(folder / SHARD_DIR), config)
            self._written.add(name)
            self._write_meta(name, new_meta(dense, sparse, metadata))

    def update_metadata(self, name: str, metadata: Mapping[str, Any]) -> None:
        with self._mutex:
            meta = dict(self._read_meta(name))
            meta["metadata"] = {**meta["metadata"], **metadata}
            self._write_meta(name, meta)

    def drop(self, name: str) -> bool:
        """Delete the collection `name` itself (never through an alias, as on a server)."""
        with self._mutex:
            folder = self.root / name
            if not (folder / META_FILE).is_file():
                return False
            self._hold(name)
            shard = self._shards.pop(name, None)
            if shard is not None:
                shard.close()
            self._meta.pop(name, None)
            self._written.discard(name)
            # the metadata first: a crash midway leaves no half collection that looks whole
            (folder / META_FILE).unlink()
            shutil.rmtree(folder)
            if name in self._aliases.values():  # as a server does: its aliases go with it
                self._write_aliases({a: c for a, c in self._aliases.items() if c != name})
            return True

    def create_index(self, name: str, field: str, kind: models.PayloadSchemaType) -> None:
        schema = translate.SCHEMAS[models.PayloadSchemaType(kind)]
        self._update(name, qe.UpdateOperation.create_field_index(field, schema))

    def optimize(self, name: str) -> bool:
        """Merge segments and build the vector indexes (blocking: up to minutes)."""
        with self._mutex:
            changed = self._shard(name).optimize()
            if changed:
                self._written.add(self._resolve(name))
            return changed

    # --- points -------------------------------------------------------------------------

    def _update(self, name: str, operation: qe.UpdateOperation) -> None:
        with self._mutex:
            self._shard(name).update(operation)
            self._written.add(self._resolve(name))

    def upsert(self, name: str, points: Sequence[models.PointStruct]) -> None:
        batch = [translate.point(p) for p in points]
        self._update(name, qe.UpdateOperation.upsert_points(batch))

    def delete(self, name: str, where: models.Filter) -> None:
        self._update(name, qe.UpdateOperation.delete_points_by_filter(translate.must(where)))

    def set_payload(self, name: str, payload: Mapping[str, Any], where: models.Filter) -> None:
        operation = qe.UpdateOperation.set_payload_by_filter(translate.must(where), dict(payload))
        self._update(name, operation)

    def delete_payload(self, name: str, keys: Sequence[str], where: models.Filter) -> None:
        operation = qe.UpdateOperation.delete_payload_by_filter(translate.must(where), list(keys))
        self._update(name, operation)

    def retrieve(
        self, name: str, ids: Sequence[str], *, payload: Fields = True, vectors: Fields = False
    ) -> list[Record]:
        with self._mutex:
            found = self._shard(name).retrieve(
                translate.ids(ids),
                with_payload=translate.fields(payload),
                with_vector=translate.fields(vectors),
            )
        return [translate.record(r) for r in found]

    def scroll(
        self,
        name: str,
        where: models.Filter | None,
        *,
        limit: int,
        offset: str | None = None,
        payload: Fields = True,
        vectors: Fields = False,
        order_by: models.OrderBy | None = None,
    ) -> tuple[list[Record], str | None]:
        request = qe.ScrollRequest(
            offset=translate.point_id(offset) if offset is not None else None,
            limit=limit,
            filter=translate.where(where),
            with_payload=translate.fields(payload),
            with_vector=translate.fields(vectors),
            order_by=translate.order_by(order_by),
        )
        with self._mutex:
            records, after = self._shard(name).scroll(request)
        return [translate.record(r) for r in records], None if after is None else str(after)

    def count(self, name: str, where: models.Filter | None) -> int:
        request = qe.CountRequest(exact=True, filter=translate.where(where))
        with self._mutex:
            return self._shard(name).count(request)

    def facet(
        self, name: str, key: str, where: models.Filter | None, limit: int
    ) -> list[tuple[str, int]]:
        request = qe.FacetRequest(key, limit=limit, exact=True, filter=translate.where(where))
        with self._mutex:
            hits = self._shard(name).facet(request).hits
        return [(str(h.value), h.count) for h in hits]

    def query(self, name: str, request: models.QueryRequest) -> list[Scored]:
        return self._ranked(
            name, request, request.limit or 10, wanted_payload(request.with_payload)
        )

    def query_batch(self, name: str, requests: Sequence[models.QueryRequest]) -> list[list[Scored]]:
        """In this process a batch is the queries one after the other, under one lock."""
        with self._mutex:
            return [self.query(name, r) for r in requests]

    def _ranked(
        self,
        name: str,
        request: models.QueryRequest | models.QueryGroupsRequest,
        limit: int,
        payload: models.WithPayloadInterface | None,
    ) -> list[Scored]:
        edge_request = translate.request(request, limit, translate.fields(payload))
        with self._mutex:
            found = self._shard(name).query(edge_request)
        return [Scored(str(p.id), p.score, p.payload or {}) for p in found]

    def query_groups(self, name: str, request: models.QueryGroupsRequest) -> list[Scored]:
        """What a server's grouped query returns, from one ranked query deep enough to hold
        it (prefetches as deep as a server makes them, deeper while a few groups hold most of
        the best points). The ranking reads only each point's group field; the payloads of the
        points kept are read after (bench/scale.py: the ranked query is most of the time, and
        its cost grows with how many points it returns)."""
        limit, size, key = request.limit or 10, request.group_size or 3, request.group_by
        fetch = PREFETCH_FACTOR * limit * size
        while True:
            ranked = self._ranked(name, ungrouped(request, fetch, [key]), fetch, [key])
            kept = best_per_group(ranked, key, size, limit)
            if len(kept) == limit or len(ranked) < fetch:
                # enough points, or the whole (filtered) collection was ranked
                return self._with_payloads(name, kept, wanted_payload(request.with_payload))
            fetch *= 4

    def _with_payloads(
        self,
        name: str,
        scored: Sequence[Scored],
        payload: models.WithPayloadInterface | None,
    ) -> list[Scored]:
        if not scored:
            return []
        found = self.retrieve(name, [p.id for p in scored], payload=translate.fields(payload))
        payloads = {r.id: r.payload for r in found}
        # a point deleted since it was ranked has no payload left: it is no hit any more
        return [Scored(p.id, p.score, payloads[p.id]) for p in scored if p.id in payloads]


def tuned_store(
    path: str | Path,
    collection: str,
    *,
    optimizers: qe.EdgeOptimizersConfig | None = None,
    quantization: qe.ScalarQuantizationConfig | None = None,
) -> Store:
    """A Store on embedded storage whose new collections get these qdrant-edge settings: an
    indexing threshold that indexes a small corpus as a big one is (tests, bench/retrieval.py),
    int8 quantization (bench/scale.py, bench/retrieval.py). No setting selects them."""
    from kb.store.points import Store

    engine = EdgeEngine.open(path, collection, optimizers=optimizers, quantization=quantization)
    return Store(engine, collection)
