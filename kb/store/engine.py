"""The storage seam: every operation the Store asks of Qdrant, and what comes back.

Two engines implement `Engine`: a Qdrant server (kb.store.server, a thin adapter over
qdrant-client's `QdrantClient`) and embedded storage on Qdrant's engine in-process
(kb.store.edge, qdrant-edge). Requests are qdrant-client's own request models (kb.store.models
loads them without its clients); results are the small types below, the same from both engines,
so nothing above kb.store depends on which one answers. Every method takes the collection's
name first, and raises StoreError (or StoreUnavailable) saying where and what to do, never a
library's exception.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from kb.store.models import models

# A stored payload: JSON values by field name (kb.core.schema.ChunkRecord's fields)
Payload = dict[str, Any]
# which payload fields (or named vectors) to return: all, none, or these
Fields = bool | Sequence[str]
StoredVector: TypeAlias = "list[float] | models.SparseVector"  # a string: models load on use


@dataclass(frozen=True)
class Record:
    """A stored point: its id, the payload fields asked for, the vectors asked for."""

    id: str
    payload: Payload
    vectors: dict[str, StoredVector]


@dataclass(frozen=True)
class Scored:
    """A point a query found, with its score and the payload fields asked for."""

    id: str
    score: float
    payload: Payload


@dataclass(frozen=True)
class StoredCollection:
    """A collection as its engine describes it."""

    dense: dict[str, models.VectorParams]  # named dense vectors
    sparse: dict[str, models.SparseVectorParams]  # named sparse vectors
    metadata: dict[str, Any]  # what kb.store.collection recorded (model, layout, build state)
    points: int
    segments: int  # what `optimize` merges and indexes
    indexed_vectors: int  # vectors in an HNSW index (the rest are scanned)


@dataclass(frozen=True)
class ClusterLayout:
    """How a new collection is spread over a Qdrant cluster (QDRANT_SHARDS, QDRANT_REPLICATION,
    QDRANT_WRITE_CONSISTENCY); embedded storage has one shard and ignores it."""

    shards: int = 1
    replicas: int = 1
    write_consistency: int = 1


def wanted_payload(selector: models.WithPayloadInterface | None) -> models.WithPayloadInterface:
    """What a query request's `with_payload` asks for: unset means all (qdrant-client's default),
    so both engines answer an unset one alike."""
    return True if selector is None else selector


def best_per_group(ranked: Sequence[Scored], key: str, size: int, limit: int) -> list[Scored]:
    """The first `limit` of `ranked` (best first) with at most `size` of any one value of
    payload field `key`: what a grouped query returns, for an engine that ranks without
    grouping. As a server does, a point without the field (or with a list) joins no group."""
    kept: list[Scored] = []
    taken: dict[str | int, int] = {}
    for point in ranked:
        group = point.payload.get(key)
        if not isinstance(group, str | int) or taken.get(group, 0) >= size:
            continue
        taken[group] = taken.get(group, 0) + 1
        kept.append(point)
        if len(kept) == limit:
            break
    return kept


def best_per_note(
    ranked: Sequence[Scored],
    meaning: Sequence[Scored],
    words: Sequence[Scored],
    key: str,
    size: int,
    limit: int,
) -> tuple[list[Scored], set[str | int]]:
    """`best_per_group` with the groups (notes: payload field `key`) ranked by their best
    `meaning` plus their best `words` (the halves of `ranked`'s scores over every candidate,
    kb.store.query.note_parts), not by their best point's sum: a note with one passage close in
    meaning and another holding the query's words ranks by both (bench/README.md, issue 51).
    Each group's points keep their order and are shifted by one amount, so its first carries
    the group's score. Also returns the groups among the first `limit` that have no point in
    `ranked` (it is not deep enough for them)."""
    halves: list[dict[str | int, float]] = [{}, {}]
    for found, best in zip((meaning, words), halves, strict=True):
        for point in found:
            group = point.payload.get(key)
            if isinstance(group, str | int) and point.score > best.get(group, float("-inf")):
                best[group] = point.score
    scores = {g: halves[0].get(g, 0.0) + halves[1].get(g, 0.0) for g in halves[0] | halves[1]}
    first: dict[str | int, float] = {}
    for point in ranked:
        group = point.payload.get(key)
        if isinstance(group, str | int) and group in scores:
            first.setdefault(group, point.score)
    shifted = sorted(
        (
            Scored(p.id, p.score + scores[g] - first[g], p.payload)
            for p in ranked
            if isinstance(g := p.payload.get(key), str | int) and g in first
        ),
        key=lambda p: -p.score,
    )
    leading = sorted(scores, key=lambda g: -scores[g])[:limit]
    return best_per_group(shifted, key, size, limit), {g for g in leading if g not in first}


class Engine(Protocol):
    """One Qdrant: a server or an embedded storage folder, several collections in it."""

    @property
    def location(self) -> str:
        """ "Qdrant at URL (QDRANT_URL)" or "embedded Qdrant in PATH (QDRANT_PATH)", for
        messages."""
        ...

    @property
    def folder(self) -> Path | None:
        """The embedded storage folder (QDRANT_PATH); None for a server."""
        ...

    def close(self) -> None: ...

    # --- collections ----------------------------------------------------------------------

    def collection_names(self) -> list[str]: ...

    def exists(self, name: str) -> bool: ...

    def describe(self, name: str) -> StoredCollection: ...

    def create(
        self,
        name: str,
        *,
        dense: Mapping[str, models.VectorParams],
        sparse: Mapping[str, models.SparseVectorParams],
        metadata: Mapping[str, Any],
        cluster: ClusterLayout,
    ) -> None: ...

    def update_metadata(self, name: str, metadata: Mapping[str, Any]) -> None: ...

    def drop(self, name: str) -> bool:
        """Delete the collection; True if it existed."""
        ...

    def create_index(self, name: str, field: str, kind: models.PayloadSchemaType) -> None: ...

    # --- aliases (kb.ingest.switch: a rebuilt index takes over the searched name) ----------

    def aliases(self) -> dict[str, str]:
        """{alias: collection} of this Qdrant."""
        ...

    def point_alias(self, alias: str, target: str) -> str | None:
        """Make `alias` name collection `target` at once (every call sees the old collection
        or the new one); the collection it named until then, for the caller to delete (None:
        none, or one the engine had to delete first)."""
        ...

    def drop_alias(self, alias: str) -> None:
        """Remove the alias (its collection stays)."""
        ...

    def optimize(self, name: str) -> bool:
        """Merge segments and build vector indexes now (embedded storage: blocking, up to
        minutes); False when there was nothing to do. A server does it by itself: False."""
        ...

    # --- points (every write waits until it is applied) -------------------------------------

    def upsert(self, name: str, points: Sequence[models.PointStruct]) -> None: ...

    def delete(self, name: str, where: models.Filter) -> None: ...

    def set_payload(self, name: str, payload: Mapping[str, Any], where: models.Filter) -> None: ...

    def delete_payload(self, name: str, keys: Sequence[str], where: models.Filter) -> None: ...

    def retrieve(
        self, name: str, ids: Sequence[str], *, payload: Fields = True, vectors: Fields = False
    ) -> list[Record]: ...

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
        """A page of points matching `where` from `offset` (None: the first), and the offset of
        the next page (None: this was the last). With `order_by` there is no next page."""
        ...

    def count(self, name: str, where: models.Filter | None) -> int:
        """How many points match, exactly."""
        ...

    def facet(
        self, name: str, key: str, where: models.Filter | None, limit: int
    ) -> list[tuple[str, int]]:
        """(value, points carrying it) of payload field `key` among points matching, exactly."""
        ...

    def query(self, name: str, request: models.QueryRequest) -> list[Scored]: ...

    def query_batch(self, name: str, requests: Sequence[models.QueryRequest]) -> list[list[Scored]]:
        """The answers of several ungrouped queries, in order, from one request (a server's
        batch query: a search and the rankings its confidence reads, kb.store.points.search)."""
        ...

    def query_groups(self, name: str, request: models.QueryGroupsRequest) -> list[Scored]:
        """The best `limit` points with at most `group_size` of any one value of payload field
        `group_by` (a grouped query's groups, best first across them); a point without the
        field joins no group."""
        ...
