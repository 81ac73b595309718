"""The Store: one collection in one Qdrant, a server (QDRANT_URL) or embedded storage
(QDRANT_PATH), whichever engine (kb.store.engine) holds it; nothing outside kb.store talks to
an engine or a client. One point per chunk (kb.core.schema): a named dense vector, a sparse
keyword vector (BM25 term weights; Qdrant applies the IDF from live statistics), the payload.
kb.store.collection creates and checks the collection through the collection operations below.
A search is one Query API request (kb.store.query builds it): dense and keyword prefetches, each
filtered, fused by a score formula, optionally grouped by note.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from time import monotonic
from typing import Any, Literal

from kb.core.schema import (
    DELETED_AT,
    DELETED_CAUSE,
    DENSE,
    EMBEDDING,
    KEYWORD,
    RESTORED_AT,
    SOURCE,
    TAGS,
    FileStat,
    Hit,
    IndexKind,
    KeywordVector,
)
from kb.store import scan
from kb.store.engine import (
    ClusterLayout,
    Engine,
    Fields,
    Payload,
    Scored,
    StoredCollection,
    StoredVector,
    best_per_group,
    best_per_note,
)
from kb.store.models import models
from kb.store.query import (
    HYBRID_FUSION,
    PREFETCH_FACTOR,
    Fusion,
    Phrasing,
    by_note,
    first_chunks,
    note_parts,
    origin_filter,
    request,
    source_filter,
    sparse_vector,
    unembedded,
    ungrouped,
    visible,
)

UPSERT_BATCH = 256  # points per upsert request: keeps server requests well under its size limit
FILTER_BATCH = 500  # note names per `source` filter
# How long a "missing" answer stands for a server's collection (`Store.missing_lately`):
# another process (ingest.py, another MCP server) may create it there at any moment, so a search
# sees a new collection at most this late; short enough that a user who ran ingest.py and then
# asks the assistant finds it, long enough that an answer's burst of searches asks once.
MISSING_TTL = 10.0


@dataclass(frozen=True)
class Point:
    id: str
    vector: list[float] | None  # the dense vector; None: not embedded yet (keyword only)
    payload: dict[str, Any]
    keyword: KeywordVector | None = None  # the keyword vector (kb.embedding.keywords)


@dataclass(frozen=True)
class Search:
    """One query of a batch (`Store.search`): what `Store.query` takes, and the payload fields
    its hits carry (`fields`: all, or these; a grouped one's also carry `source`)."""

    limit: int
    dense: Sequence[float] | None = None
    keyword: KeywordVector | None = None
    where: models.Filter | None = None
    per_note: int | None = None
    alternates: Sequence[Phrasing] = ()
    fusion: Fusion = HYBRID_FUSION
    fields: Fields = True

    @property
    def by_note(self) -> bool:
        """Whether its notes rank by their best meaning plus their best words
        (kb.store.query.by_note, kb.store.engine.best_per_note)."""
        return by_note(self.per_note, self.dense, self.keyword, self.alternates, self.fusion)

    def request(self) -> models.QueryRequest | models.QueryGroupsRequest | None:
        """Its Query API request; None when there is nothing to look for (a keyword query of
        stopwords alone). ValueError without a vector."""
        if self.dense is None and self.keyword is None:
            raise ValueError("query needs a dense vector, a keyword vector, or both")
        if (
            self.keyword is not None
            and not self.keyword.indices
            and self.dense is None
            and not self.alternates
        ):
            return None
        return request(
            self.limit, dense=self.dense, keyword=self.keyword, where=visible(self.where),
            per_note=self.per_note, alternates=self.alternates, fusion=self.fusion,
        )  # fmt: skip


@dataclass(frozen=True)
class Found:
    """A search's hits, and what ingest recorded of their notes' files (from the hits' own
    payloads: every chunk carries it; notes stored without it are left out)."""

    hits: list[Hit]
    files: dict[str, FileStat]
    # notes among the hits stored by their words only so far (kb.ingest.run): `explain` says so
    unembedded: frozenset[str] = frozenset()


class _Seen:
    """Collections seen missing (`Store.exists`), by name: the count of changes of names made
    through these stores when it was asked, and when (monotonic). A change of names (create,
    drop, alias) voids every answer asked before it ended."""

    def __init__(self) -> None:
        self.changes = 0
        self.missing: dict[str, tuple[int, float]] = {}

    def missing_lately(self, name: str, *, ttl: float | None) -> bool:
        """Seen missing since the last change of names (and, with `ttl`, that recently)."""
        seen = self.missing.get(name)
        if seen is None or seen[0] != self.changes:
            return False
        return ttl is None or monotonic() - seen[1] < ttl

    @contextmanager
    def changing(self) -> Iterator[None]:
        try:
            yield
        finally:
            self.changes += 1  # after the change: an answer asked during it is void too


class Store:
    """One collection in one Qdrant. Build with `Store.open(...)` (kb.app.backend.open_store reads
    the settings); close when done."""

    def __init__(
        self, engine: Engine, collection: str, *, cluster: ClusterLayout | None = None
    ) -> None:
        self._engine = engine
        self._owns_engine = True  # False for a store made by `beside`
        self.collection = collection
        self.location = engine.location  # where, for messages
        self.cluster = cluster or ClusterLayout()  # how a new collection is spread
        # what kb.store.collection has already checked, so a search does not ask again
        self.checked_model: tuple[str, int] | None = None
        self.has_keyword = False
        self._seen = _Seen()  # shared by the stores `beside` this one

    @classmethod
    def open(
        cls,
        collection: str,
        *,
        url: str = "",
        path: str | Path = "",
        api_key: str = "",
        cluster: ClusterLayout | None = None,
    ) -> Store:
        """Embedded storage in folder `path` if given (Qdrant's engine in-process, kb.store.edge),
        else the server at `url` (kb.store.server). Opening changes nothing stored (a folder of
        an older version is carried over by `carry_over`, which the app calls).

        Raises StoreUnavailable when the server does not answer or the folder is in use.
        """
        engine: Engine
        if path:
            from kb.store.edge import EdgeEngine  # only embedded storage loads the engine

            engine = EdgeEngine.open(path, collection)
        else:
            from kb.store.server import ServerEngine  # only a server loads qdrant-client

            engine = ServerEngine.connect(url, api_key)
        return cls(engine, collection, cluster=cluster)

    @property
    def embedded(self) -> bool:
        """Embedded storage (QDRANT_PATH), not a server."""
        return self._engine.folder is not None

    def close(self) -> None:
        if self._owns_engine:
            self._engine.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def beside(self, collection: str) -> Store:
        """Another collection of the same Qdrant, on this store's engine (embedded Qdrant opens
        its folder once per process); closing it leaves this store open."""
        other = Store(self._engine, collection, cluster=self.cluster)
        other._owns_engine = False
        other._seen = self._seen
        return other

    def optimize(self) -> bool:
        """Build the vector indexes of embedded storage (kb.store.edge): blocks for up to
        minutes, so kb.store.optimize calls it after an ingest, never a search. False: nothing
        to do (a server optimizes by itself)."""
        return self._engine.optimize(self.collection)

    def carry_over(self) -> int | None:
        """Copy this collection from the layout an older version wrote in the embedded storage
        folder (qdrant-client's local mode, kb.store.migrate) when the engine does not hold it
        yet; the points copied, or None when there was nothing to do. Opening a store never does
        it: the app calls it once per open (kb.app.backend.open_store, make local's start)."""
        from kb.store import migrate

        return migrate.from_local_mode(self._engine, self.collection)

    # --- the collection (kb.store.collection decides what to do with it) ---------------

    def collection_names(self) -> list[str]:
        """Every collection of this Qdrant."""
        return self._engine.collection_names()

    def exists(self) -> bool:
        """Whether the collection exists (asked); a "no" is remembered (`missing_lately`)."""
        changes = self._seen.changes  # read first: a create finishing meanwhile voids the "no"
        found = self._engine.exists(self.collection)
        if found:
            self._seen.missing.pop(self.collection, None)
        else:
            self._seen.missing[self.collection] = (changes, monotonic())
        return found

    def missing_lately(self) -> bool:
        """Seen missing lately (`exists`), answered without a request: a search skips the code
        collection while it is (kb.search.domains), as many never make one. Only where a
        missing collection means no hits, never for an error or a decision that writes.

        Lately: embedded storage is locked to one process (kb.store.edge), so only this
        process creates collections there, each through a Store, which voids what the stores
        beside it saw missing (`_Seen`): the answer stands until then. On a server another
        process can create it too, unseen: the answer stands MISSING_TTL seconds at most."""
        return self._seen.missing_lately(
            self.collection, ttl=None if self.embedded else MISSING_TTL
        )

    def describe(self) -> StoredCollection:
        return self._engine.describe(self.collection)

    def create_collection(
        self,
        *,
        dense: Mapping[str, models.VectorParams],
        sparse: Mapping[str, models.SparseVectorParams],
        metadata: Mapping[str, Any],
    ) -> None:
        """Create it with these vectors, spread as `cluster` says on a cluster."""
        with self._seen.changing():
            self._engine.create(
                self.collection, dense=dense, sparse=sparse, metadata=metadata, cluster=self.cluster
            )

    def create_index(self, field: str, kind: IndexKind) -> None:
        """A payload index (idempotent): a server filters and facets only on indexed fields."""
        self._engine.create_index(self.collection, field, models.PayloadSchemaType(kind))

    def update_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Set these keys of the collection's metadata, keeping the others."""
        self._engine.update_metadata(self.collection, metadata)

    def drop_collection(self) -> bool:
        """Delete the collection and its points; True if it existed."""
        with self._seen.changing():
            return self._engine.drop(self.collection)

    # --- names (kb.ingest.switch: a rebuilt index takes over the searched name) ------------

    def target(self) -> str:
        """The collection this store's name is: itself, or the one it is an alias of."""
        return self._engine.aliases().get(self.collection, self.collection)

    def point_alias(self, target: str) -> str | None:
        """Make this store's name an alias of collection `target`, atomically; the collection
        the name was until now, for the caller to delete (None: none left). A server cannot
        give an alias a collection's name: a collection of that name (made before any switch)
        is deleted first there, and the name is missing for a moment, once; embedded storage
        lets the alias shadow it."""
        with self._seen.changing():
            return self._engine.point_alias(self.collection, target)

    def drop_alias(self) -> None:
        """Remove this store's name if it is an alias (its collection stays)."""
        with self._seen.changing():
            self._engine.drop_alias(self.collection)

    # --- points -----------------------------------------------------------------------

    def replace(self, points: Sequence[Point], sources: Iterable[str]) -> None:
        """Make `points` the only points of `sources`: upsert them, then delete the rest.

        Upserting first means searches never see a note vanish while it is being replaced.
        Every write waits until it is applied.
        """
        sources = sorted(set(sources))
        for i in range(0, len(points), UPSERT_BATCH):
            batch = points[i : i + UPSERT_BATCH]
            self._engine.upsert(
                self.collection,
                [models.PointStruct(id=p.id, vector=_vectors(p), payload=p.payload) for p in batch],
            )
        if sources:
            stale = source_filter(sources)
            stale.must_not = [models.HasIdCondition(has_id=[p.id for p in points])]
            self._engine.delete(self.collection, stale)

    def delete_sources(self, sources: Iterable[str]) -> None:
        """Remove every point of these notes."""
        for batch in _batches(sources):
            self._engine.delete(self.collection, source_filter(batch))

    def soft_delete(self, sources: Iterable[str], cause: str, when: str) -> None:
        """Hide these notes from every search and count, keeping their points (text, vectors)
        with `deleted_at` = when (UTC ISO) and `deleted_cause` = cause."""
        for batch in _batches(sources):
            payload = {DELETED_AT: when, DELETED_CAUSE: cause}
            self._engine.set_payload(self.collection, payload, source_filter(batch))

    def restore(self, sources: Iterable[str], when: str | None = None) -> None:
        """Make soft-deleted notes searchable again, as they were (no embedding): their
        `deleted_at` and `deleted_cause` are removed; with `when` (a restore by hand, UTC ISO)
        `restored_at` is set, which keeps a sync from deleting them again while their files stay
        away (kb.ingest.plan); without it (their files are back) `restored_at` is removed too."""
        keys = [DELETED_AT, DELETED_CAUSE] + ([RESTORED_AT] if when is None else [])
        for batch in _batches(sources):
            self._engine.delete_payload(self.collection, keys, source_filter(batch))
            if when is not None:
                self._engine.set_payload(self.collection, {RESTORED_AT: when}, source_filter(batch))

    def set_fields(self, values: dict[str, dict[str, Any]]) -> None:
        """Set payload fields on every point of each note (by source), nothing re-embedded: a
        video's refreshed view count (kb.sources.youtube.playlist)."""
        for source, payload in sorted(values.items()):
            self._engine.set_payload(self.collection, payload, source_filter([source]))

    def deleted_notes(self, where: models.Filter) -> list[Payload]:
        """The lifecycle fields (source, origin, deleted_at, deleted_cause) of the first chunk of
        every note matching `where` (kb.store.query.deleted_filter), by source."""
        return scan.deleted_notes(self._engine, self.collection, where)

    def fingerprints(
        self, sources: Iterable[str] | None = None, *, origin: str | None = None
    ) -> dict[str, dict[str, str]]:
        """{source: {point id: its note's fingerprint}} for every stored point (of `sources`, or
        of one `origin`: the inbox or a NOTE_FOLDERS name).

        The fingerprint (payload `note_hash`, see kb.ingest.run) says which version of a note the
        point was written from, so ingest can leave a note whose points would not change alone.
        A point without one (written by an older version) maps to ""; a point of a soft-deleted
        note carries DELETED_MARK before it, one of a note restored by hand RESTORED_MARK.
        """
        out: dict[str, dict[str, str]] = {}
        if sources is None:
            flt = origin_filter(origin) if origin else None
            scan.read_fingerprints(self._engine, self.collection, flt, out)
            return out
        # a few hundred names per filter keeps each request small for a server
        for batch in _batches(sources):
            scan.read_fingerprints(self._engine, self.collection, source_filter(batch), out)
        return out

    def notes(self, fields: Sequence[str], where: models.Filter | None = None) -> list[Payload]:
        """These payload fields of the first chunk of every live note matching `where`, by
        source: one row per note (a vault's link graph, kb.search.related)."""
        return scan.notes(self._engine, self.collection, fields, where)

    def note_aliases(self, origin: str) -> dict[str, list[str]]:
        """{source: aliases} of the live notes of one origin: what an incomplete source's links
        may name besides the notes it lists now (kb.ingest.prepare)."""
        return scan.note_aliases(self._engine, self.collection, origin)

    def dense_vectors(self, source: str) -> list[list[float]]:
        """The dense vectors of a note's chunks (its nearest notes, kb.search.related)."""
        return scan.dense_vectors(self._engine, self.collection, source)

    def payloads(self, source: str | None = None) -> list[tuple[str, Payload]]:
        """(id, payload) of every point (of one source), for checks and maintenance."""
        return scan.payloads(self._engine, self.collection, source)

    def records(
        self, ids: Sequence[str], *, vectors: Fields = False
    ) -> dict[str, tuple[Payload, dict[str, StoredVector]]]:
        """{id: (payload, vectors)} of these points as stored, for checks and maintenance."""
        found = self._engine.retrieve(self.collection, ids, payload=True, vectors=vectors)
        return {r.id: (r.payload, r.vectors) for r in found}

    def query(
        self,
        limit: int,
        *,
        dense: Sequence[float] | None = None,
        keyword: KeywordVector | None = None,
        where: models.Filter | None = None,
        per_note: int | None = None,
        alternates: Sequence[Phrasing] = (),
        fusion: Fusion = HYBRID_FUSION,
    ) -> list[Hit]:
        """The best `limit` points for a dense vector, a keyword vector, or both (hybrid), in
        one Query API request; `where` (kb.store.query.payload_filter) applies inside each
        prefetch, so fusion only ever sees matching points. `alternates`: more phrasings, fused
        with this one by reciprocal rank in the same request (kb.store.query.request). `fusion`
        merges the two rankings of a hybrid query (the references are for benchmarks).

        With `per_note`, at most that many points per note (grouped by `source` in the same
        request): `limit` distinct notes when per_note is 1. Scores: cosine similarity (dense
        alone), BM25 (keyword alone), or cosine plus a keyword bonus of 0..1, 0..2 for a lookup
        (both: see kb.store.query.fusion). Soft-deleted notes are never found. kb.search.query
        checks the collection first (kb.store.collection).
        """
        asked = Search(
            limit, dense=dense, keyword=keyword, where=where, per_note=per_note,
            alternates=alternates, fusion=fusion,
        )  # fmt: skip
        if asked.by_note:  # three rankings: one batch, grouped here (`search`)
            return self.search([asked])[0].hits
        search = asked.request()
        if search is None:
            return []
        if isinstance(search, models.QueryGroupsRequest):
            points = self._engine.query_groups(self.collection, search)
        else:
            points = self._engine.query(self.collection, search)
        return [Hit.from_payload(p.score, p.payload) for p in points[:limit]]

    def search(self, searches: Sequence[Search]) -> list[Found]:
        """Several queries in one request to the engine (a search and the rankings its
        confidence reads: kb.search.entry), answered in order as `query` would answer each.

        A server has no batch of grouped queries, so a grouped one is sent as the ranked query
        that holds its groups (kb.store.query.ungrouped), and its groups are kept here
        (kb.store.engine.best_per_group), as embedded storage keeps them for `query`. When a
        few notes hold most of the best points, those searches go again, deeper, in another
        request (rare: the first depth is PREFETCH_FACTOR points per one asked for)."""
        requests = [s.request() for s in searches]
        answers: list[list[Scored]] = [[] for _ in searches]
        fetch = {
            i: PREFETCH_FACTOR * s.limit * s.per_note if s.per_note else s.limit
            for i, (s, r) in enumerate(zip(searches, requests, strict=True))
            if r is not None
        }
        while fetch:
            asked = {i: self._ranked_request(searches[i], requests[i], depth)
                     for i, depth in fetch.items()}  # fmt: skip
            halves = {
                i: note_parts(r, searches[i].keyword)  # type: ignore[arg-type]
                for i, r in asked.items()
                if searches[i].by_note
            }
            batch = [*asked.values(), *(r for parts in halves.values() for r in parts)]
            found = iter(self._engine.query_batch(self.collection, batch))
            ranks = [next(found) for _ in asked]
            deeper: dict[int, int] = {}
            for i, ranked in zip(asked, ranks, strict=True):
                size = searches[i].per_note
                limit = searches[i].limit
                missing: set[str | int] = set()
                if i in halves:
                    meaning, words = next(found), next(found)
                    kept, missing = best_per_note(ranked, meaning, words, SOURCE, size or 1, limit)
                else:
                    kept = best_per_group(ranked, SOURCE, size, limit) if size else ranked[:limit]
                short = len(kept) < limit or bool(missing)
                if short and size and len(ranked) == fetch[i]:
                    deeper[i] = fetch[i] * 4  # the whole (filtered) collection is not ranked yet
                answers[i] = kept
            fetch = deeper
        return [_found(points) for points in answers]

    def _ranked_request(
        self,
        search: Search,
        asked: models.QueryRequest | models.QueryGroupsRequest | None,
        fetch: int,
    ) -> models.QueryRequest:
        payload: models.WithPayloadInterface = (
            search.fields if isinstance(search.fields, bool) else [SOURCE, *search.fields]
        )
        if isinstance(asked, models.QueryGroupsRequest):
            return ungrouped(asked, fetch, payload)
        assert asked is not None
        return asked.model_copy(update={"with_payload": payload})

    def backlink_counts(self, sources: Iterable[str]) -> dict[str, int]:
        """How many live notes link to each of these notes, from one read of the links of the
        notes linking to any of them (a page per SCROLL_PAGE of those). Needs no payload index:
        a facet would, and a collection of an older layout has none for `links` until its next
        ingest (a count is no reason for a search to fail)."""
        wanted = sorted(set(sources))
        return scan.backlink_counts(self._engine, self.collection, wanted) if wanted else {}

    def note_counts(self, key: str) -> tuple[int, list[tuple[str, int]]]:
        """Live (not soft-deleted) notes: how many, and per value of payload field `key` (e.g.
        `origin`; notes stored without the field are only in the total)."""
        notes = visible(first_chunks())
        total = self._engine.count(self.collection, notes)
        return total, self._engine.facet(self.collection, key, notes, 10_000)

    def browse(
        self,
        where: models.Filter | None,
        *,
        order_by: str,
        descending: bool = False,
        limit: int = 20,
        offset: int = 0,
    ) -> list[Hit]:
        """Points matching `where`, ordered by one payload field, `offset` of them skipped: a
        listing with no query (kb.search.browse asks for first chunks only). Scores are 0.
        Soft-deleted notes are never listed; a point without the field is not listed either.

        A field with a range index (integer, datetime: kb.core.schema.PAYLOAD_INDEXES) is ordered
        by Qdrant (scroll with order_by, which takes no offset: the first offset+limit are read);
        any other (title) is ordered here, reading that field alone of every matching point.
        """
        found = scan.browse(
            self._engine, self.collection, visible(where), order_by,
            descending=descending, limit=limit, offset=offset,
        )  # fmt: skip
        return [Hit.from_payload(0.0, payload) for payload in found]

    def unembedded(self, *, notes: bool = False) -> int:
        """Live points (with `notes`, notes: a note is embedded whole) stored by their words
        alone, waiting for their dense vector (kb.ingest.run): keyword search finds them,
        semantic search not yet."""
        waiting = models.Filter(must=[unembedded()])
        return self.count(first_chunks(waiting) if notes else waiting)

    def count(self, where: models.Filter | None = None, *, deleted: bool = False) -> int:
        """How many points match `where`, exactly: soft-deleted notes' only with `deleted`."""
        return self._engine.count(self.collection, where if deleted else visible(where))

    def tag_counts(
        self, limit: int = 10_000, *, per: Literal["note", "chunk"] = "note"
    ) -> list[tuple[str, int]]:
        """(tag, number of notes carrying it), or with per="chunk" (tag, number of chunks),
        most used first, then alphabetical; soft-deleted notes are not counted."""
        if per not in ("note", "chunk"):
            raise ValueError(f"per must be 'note' or 'chunk', got {per!r}")
        # every note has exactly one chunk 0, so counting those counts notes, not chunks
        where = visible(first_chunks() if per == "note" else None)
        counts = self._engine.facet(self.collection, TAGS, where, limit)
        return sorted(counts, key=lambda tc: (-tc[1], tc[0]))


def _found(points: Sequence[Scored]) -> Found:
    files: dict[str, FileStat] = {}
    unembedded: set[str] = set()
    for point in points:
        stat, source = FileStat.stored(point.payload), point.payload.get(SOURCE)
        if stat is not None and isinstance(source, str):
            files[source] = stat
        if point.payload.get(EMBEDDING) and isinstance(source, str):
            unembedded.add(source)
    hits = [Hit.from_payload(p.score, p.payload) for p in points]
    return Found(hits, files, frozenset(unembedded))


def _batches(sources: Iterable[str]) -> Iterator[list[str]]:
    """These note names, sorted, a few hundred per filter (small requests for a server)."""
    wanted = sorted(set(sources))
    for i in range(0, len(wanted), FILTER_BATCH):
        yield wanted[i : i + FILTER_BATCH]


def _vectors(point: Point) -> dict[str, models.Vector]:
    vectors: dict[str, models.Vector] = {} if point.vector is None else {DENSE: point.vector}
    if point.keyword is not None:
        vectors[KEYWORD] = sparse_vector(point.keyword)
    return vectors
