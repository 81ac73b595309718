"""A Qdrant server (QDRANT_URL) as an Engine (kb.store.engine): a thin adapter over
qdrant-client's `QdrantClient`, whose HTTP errors become StoreErrors that name the setting to fix.

Loaded only for a server: `import qdrant_client` costs most of a cold `query.py`, which embedded
storage never pays (kb.store.models).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient

from kb.core.errors import StoreError, StoreUnavailable
from kb.store.engine import (
    ClusterLayout,
    Fields,
    Record,
    Scored,
    StoredCollection,
    StoredVector,
    wanted_payload,
)
from kb.store.models import exceptions, models

# What a secured Qdrant's refusals mean, said with the setting to fix (docs/guide/security.md).
KEY_REFUSED = {
    401: "refused the key in QDRANT_API_KEY (HTTP 401: missing or wrong); set QDRANT_API_KEY "
    "to the QDRANT_API_KEY in the stack's .env (`make keys` creates it)",
    403: "refused a write with the key in QDRANT_API_KEY (HTTP 403: a read-only key); "
    "writing needs the read-write QDRANT_API_KEY from the stack's .env",
}


class ServerEngine:
    """Collections of one Qdrant server, through one QdrantClient (thread-safe: an HTTP pool).

    Any QdrantClient answers alike, so tests also run this adapter on qdrant-client's own
    in-process implementation of the server's API (`QdrantClient(path=...)`)."""

    def __init__(self, client: QdrantClient, location: str) -> None:
        self._client = client
        self.location = location
        self.folder: Path | None = None

    @classmethod
    def connect(cls, url: str, api_key: str = "") -> ServerEngine:
        """The server at `url`; StoreUnavailable (or StoreError for a refused key) now, with a
        clear message, when it does not answer."""
        with warnings.catch_warnings():
            # The stack's Qdrant is on loopback or the compose network, where plain HTTP is the
            # design; qdrant-client warns about any key sent over http.
            warnings.filterwarnings("ignore", "Api key is used with an insecure connection")
            client = QdrantClient(
                url=url,
                api_key=api_key or None,
                check_compatibility=False,  # it warns from a thread; we probe below instead
            )
        engine = cls(client, f"Qdrant at {url} (QDRANT_URL)")
        engine.collection_names()
        return engine

    @contextmanager
    def _calls(self) -> Iterator[None]:
        """Qdrant's exceptions as StoreErrors that say where and what to do."""
        try:
            yield
        except exceptions.ResponseHandlingException as exc:
            raise StoreUnavailable(
                f"{self.location} is unreachable ({exc.source}); is it running?"
            ) from None
        except exceptions.UnexpectedResponse as exc:
            if exc.status_code in KEY_REFUSED:
                raise StoreError(f"{self.location} {KEY_REFUSED[exc.status_code]}") from None
            detail = exc.content.decode("utf-8", "replace")[:300]
            raise StoreError(f"{self.location} answered HTTP {exc.status_code}: {detail}") from None

    def close(self) -> None:
        self._client.close()

    # --- collections ----------------------------------------------------------------------

    def collection_names(self) -> list[str]:
        with self._calls():
            return sorted(c.name for c in self._client.get_collections().collections)

    def exists(self, name: str) -> bool:
        with self._calls():
            return self._client.collection_exists(name)

    def describe(self, name: str) -> StoredCollection:
        with self._calls():
            found = self._client.get_collection(name)
        vectors = found.config.params.vectors
        return StoredCollection(
            dense=dict(vectors) if isinstance(vectors, dict) else {},
            sparse=dict(found.config.params.sparse_vectors or {}),
            metadata=dict(found.config.metadata or {}),
            points=found.points_count or 0,
            segments=found.segments_count,
            indexed_vectors=found.indexed_vectors_count or 0,
        )

    def create(
        self,
        name: str,
        *,
        dense: Mapping[str, models.VectorParams],
        sparse: Mapping[str, models.SparseVectorParams],
        metadata: Mapping[str, Any],
        cluster: ClusterLayout,
    ) -> None:
        with self._calls():
            self._client.create_collection(
                name,
                vectors_config=dense,
                sparse_vectors_config=sparse,
                metadata=dict(metadata),
                shard_number=cluster.shards,
                replication_factor=cluster.replicas,
                write_consistency_factor=cluster.write_consistency,
            )

    def update_metadata(self, name: str, metadata: Mapping[str, Any]) -> None:
        with self._calls():
            self._client.update_collection(name, metadata=dict(metadata))

    def drop(self, name: str) -> bool:
        with self._calls():
            return self.exists(name) and self._client.delete_collection(name)

    def aliases(self) -> dict[str, str]:
        with self._calls():
            found = self._client.get_aliases().aliases
        return {a.alias_name: a.collection_name for a in found}

    def point_alias(self, alias: str, target: str) -> str | None:
        create = models.CreateAliasOperation(
            create_alias=models.CreateAlias(collection_name=target, alias_name=alias)
        )
        before = self.aliases().get(alias)
        with self._calls():
            if before is not None:  # delete and create in one request: atomic
                drop = models.DeleteAliasOperation(
                    delete_alias=models.DeleteAlias(alias_name=alias)
                )
                self._client.update_collection_aliases(change_aliases_operations=[drop, create])
                return before
            if self._client.collection_exists(alias):
                # a server cannot give an alias a collection's name: that one goes first, and
                # the name is missing for the moment between the two requests, once
                self._client.delete_collection(alias)
            self._client.update_collection_aliases(change_aliases_operations=[create])
        return None

    def drop_alias(self, alias: str) -> None:
        drop = models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias))
        with self._calls():
            self._client.update_collection_aliases(change_aliases_operations=[drop])

    def create_index(self, name: str, field: str, kind: models.PayloadSchemaType) -> None:
        with self._calls(), warnings.catch_warnings():
            # qdrant-client's in-process mode (tests) warns that it ignores payload indexes
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            self._client.create_payload_index(name, field, field_schema=kind, wait=True)

    def optimize(self, name: str) -> bool:
        return False  # a server merges segments and builds its indexes in the background

    # --- points ---------------------------------------------------------------------------

    def upsert(self, name: str, points: Sequence[models.PointStruct]) -> None:
        with self._calls():
            self._client.upsert(name, points=list(points), wait=True)

    def delete(self, name: str, where: models.Filter) -> None:
        with self._calls():
            selector = models.FilterSelector(filter=where)
            self._client.delete(name, points_selector=selector, wait=True)

    def set_payload(self, name: str, payload: Mapping[str, Any], where: models.Filter) -> None:
        with self._calls():
            self._client.set_payload(
                name, payload=dict(payload), points=models.FilterSelector(filter=where), wait=True
            )

    def delete_payload(self, name: str, keys: Sequence[str], where: models.Filter) -> None:
        with self._calls():
            self._client.delete_payload(
                name, keys=list(keys), points=models.FilterSelector(filter=where), wait=True
            )

    def retrieve(
        self, name: str, ids: Sequence[str], *, payload: Fields = True, vectors: Fields = False
    ) -> list[Record]:
        with self._calls():
            found = self._client.retrieve(
                name, list(ids), with_payload=_fields(payload), with_vectors=_fields(vectors)
            )
        return [_record(r) for r in found]

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
        with self._calls():
            records, after = self._client.scroll(
                name,
                scroll_filter=where,
                limit=limit,
                offset=offset,
                order_by=order_by,
                with_payload=_fields(payload),
                with_vectors=_fields(vectors),
            )
        return [_record(r) for r in records], None if after is None else str(after)

    def count(self, name: str, where: models.Filter | None) -> int:
        with self._calls():
            return self._client.count(name, count_filter=where, exact=True).count

    def facet(
        self, name: str, key: str, where: models.Filter | None, limit: int
    ) -> list[tuple[str, int]]:
        with self._calls():
            found = self._client.facet(name, key=key, facet_filter=where, limit=limit, exact=True)
        return [(str(hit.value), hit.count) for hit in found.hits]

    def query(self, name: str, request: models.QueryRequest) -> list[Scored]:
        with self._calls():
            found = self._client.query_points(
                name,
                query=request.query,
                using=request.using,
                prefetch=request.prefetch,
                query_filter=request.filter,
                limit=request.limit or 10,
                with_payload=wanted_payload(request.with_payload),
            )
        return [_scored(p) for p in found.points]

    def query_batch(self, name: str, requests: Sequence[models.QueryRequest]) -> list[list[Scored]]:
        asked = [
            r.model_copy(update={"with_payload": wanted_payload(r.with_payload)}) for r in requests
        ]
        with self._calls():
            found = self._client.query_batch_points(name, asked)
        return [[_scored(p) for p in answer.points] for answer in found]

    def query_groups(self, name: str, request: models.QueryGroupsRequest) -> list[Scored]:
        with self._calls():
            groups = self._client.query_points_groups(
                name,
                group_by=request.group_by,
                group_size=request.group_size or 3,
                query=request.query,
                using=request.using,
                prefetch=request.prefetch,
                query_filter=request.filter,
                limit=request.limit or 10,
                with_payload=wanted_payload(request.with_payload),
            ).groups
        # best first across groups; sorted() keeps the group order among equal scores
        hits = sorted((p for g in groups for p in g.hits), key=lambda p: -p.score)
        return [_scored(p) for p in hits[: request.limit or 10]]


def _fields(fields: Fields) -> bool | list[str]:
    return fields if isinstance(fields, bool) else list(fields)


def _scored(point: models.ScoredPoint) -> Scored:
    return Scored(str(point.id), point.score, point.payload or {})


def _record(record: models.Record) -> Record:
    vectors: dict[str, StoredVector] = {}
    if isinstance(record.vector, dict):
        for key, vector in record.vector.items():
            if isinstance(vector, models.SparseVector):
                vectors[key] = vector
                continue
            dense = [x for x in vector if isinstance(x, float)]
            if len(dense) == len(vector):  # a multivector is none of ours
                vectors[key] = dense
    return Record(str(record.id), record.payload or {}, vectors)
