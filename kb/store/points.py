"""Points and queries: with kb.store.collection, the only modules that talk to Qdrant, a server
(QDRANT_URL) or embedded storage (QDRANT_PATH).

One collection holds one point per chunk (kb.core.schema): a named dense vector, a sparse keyword
vector (BM25 term weights whose IDF half Qdrant applies from live collection statistics) and the
chunk's payload. kb.store.collection creates and checks the collection; this module reads and writes
its points.

A search is one Query API call: dense and keyword prefetches (each filtered), fused by a score
formula, optionally grouped by note (`query_points_groups`, group_by source); kb.store.query
builds the request.

Over ~300 lines on purpose: every qdrant-client call on points stays here (one place to put
another engine behind, e.g. Qdrant's in-process engine), each method a thin call.
"""

from __future__ import annotations

import fcntl
import functools
import threading
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kb.core.errors import StoreError, StoreUnavailable
from kb.core.schema import (
    CHUNK_INDEX,
    DELETED_AT,
    DELETED_CAUSE,
    DELETED_MARK,
    DENSE,
    FILE_FIELDS,
    KEYWORD,
    NOTE_HASH,
    ORIGIN,
    PAYLOAD_INDEXES,
    RESTORED_AT,
    RESTORED_MARK,
    SOURCE,
    TAGS,
    FileStat,
    Hit,
)
from kb.core.state import private_folder
from kb.embedding.keywords import KeywordVector
from kb.store.models import exceptions, models
from kb.store.query import (
    HYBRID_FUSION,
    PREFETCH_FACTOR,
    Fusion,
    Phrasing,
    grouped_depth,
    origin_filter,
    request,
    sparse_vector,
    visible,
)

KEYWORD_INDEX = models.PayloadSchemaType.KEYWORD
UPSERT_BATCH = 256  # points per upsert request: keeps server requests well under its size limit
SCROLL_PAGE = 2048  # points per scroll page when only a few small payload fields are read
FILTER_BATCH = 500  # note names per `source` filter

# What a secured Qdrant's refusals mean, said with the setting to fix (docs/security.md).
KEY_REFUSED = {
    401: "refused the key in QDRANT_API_KEY (HTTP 401: missing or wrong); set QDRANT_API_KEY "
    "to the QDRANT_API_KEY in the stack's .env (`make keys` creates it)",
    403: "refused a write with the key in QDRANT_API_KEY (HTTP 403: a read-only key); "
    "writing needs the read-write QDRANT_API_KEY from the stack's .env",
}


@dataclass(frozen=True)
class Point:
    id: str
    vector: list[float]  # the dense vector
    payload: dict[str, Any]
    keyword: KeywordVector | None = (
        None  # the keyword vector (kb.embedding.keywords.document_vector)
    )


def source_filter(sources: Iterable[str]) -> models.Filter:
    return models.Filter(
        must=[models.FieldCondition(key=SOURCE, match=models.MatchAny(any=list(sources)))]
    )


def _folder_locked(path: Path) -> bool:
    """Whether another client holds the embedded storage folder (qdrant-client flocks `.lock`)."""
    try:
        handle = (path / ".lock").open("r+")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


class _OneAtATime:
    """The embedded client (local mode or the engine), one call at a time: qdrant-client's local
    mode is not thread-safe (a search beside an upsert can fail mid-scan), and a server's threads
    share one store (the MCP
    server's searches and its watcher, MCP_WATCH)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.RLock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return call


class Store:
    """One collection in one Qdrant. Build with `Store.open(...)` (kb.app.backend.open_store reads
    the settings); close when done."""

    def __init__(
        self, client: Any, collection: str, location: str, *, embedded: bool = False
    ) -> None:
        self.client = client
        self.collection = collection
        self.location = location  # "Qdrant at URL" or "embedded Qdrant in PATH", for messages
        self.embedded = embedded  # qdrant-client's local mode (QDRANT_PATH), not a server
        # what kb.store.collection has already checked, so a search does not ask again
        self.checked_model: tuple[str, int] | None = None
        self.has_keyword = False
        self.cluster: dict[str, int] = {}  # shard_number etc. for a new collection (kb.app.backend)
        self.owns_client = True  # False for a store made by `beside`

    @classmethod
    def open(
        cls,
        collection: str,
        *,
        url: str = "",
        path: str | Path = "",
        api_key: str = "",
        engine: Literal["edge", "local"] = "edge",
        tuning: dict[str, Any] | None = None,
    ) -> Store:
        """Embedded storage in folder `path` if given (Qdrant's engine in-process, kb.store.edge; or
        with engine="local" qdrant-client's local mode), else the server at `url`. `tuning`:
        more qdrant-edge settings for a collection the engine creates (bench/scale.py's int8).

        Raises StoreUnavailable when the server does not answer or the folder is in use.
        """
        if path:
            folder = private_folder(
                Path(path)
            )  # note text inside: the user's alone (kb.core.state)
            location = f"embedded Qdrant in {folder} (QDRANT_PATH)"
            busy = StoreUnavailable(
                f"{location} is in use by another process (the MCP server or another "
                "ingest?); stop it first, or run Qdrant as a server and set QDRANT_URL"
            )
            if engine == "edge":
                from kb.store import edge  # only embedded storage loads the engine
                from kb.store import migrate as migrate_local

                client: Any = edge.EdgeClient(folder, tuning=tuning)
                try:
                    client.lock(collection)
                except edge.CollectionBusy:
                    client.close()
                    raise busy from None
                store = cls(_OneAtATime(client), collection, location, embedded=True)
                migrate_local.migrate_if_needed(store, folder)
                return store
            from qdrant_client import QdrantClient  # loaded only for local mode or a server

            # checked first: a refused QdrantClient(path=...) leaks its lock file handle
            if _folder_locked(folder):
                raise busy
            try:
                client = QdrantClient(path=str(folder))
            except RuntimeError as exc:
                if "already accessed" not in str(exc):
                    raise
                raise busy from None
            return cls(_OneAtATime(client), collection, location, embedded=True)
        from qdrant_client import QdrantClient

        location = f"Qdrant at {url} (QDRANT_URL)"
        with warnings.catch_warnings():
            # The stack's Qdrant is on loopback or the compose network, where plain HTTP is the
            # design; qdrant-client warns about any key sent over http.
            warnings.filterwarnings("ignore", "Api key is used with an insecure connection")
            client = QdrantClient(
                url=url,
                api_key=api_key or None,
                check_compatibility=False,  # it warns from a thread; we probe below instead
            )
        store = cls(client, collection, location)
        with store.calls():
            client.get_collections()  # fail now, with a clear message, when it is down
        return store

    def close(self) -> None:
        if self.owns_client:
            self.client.close()

    def beside(self, collection: str) -> Store:
        """Another collection of the same Qdrant, on this store's client (embedded Qdrant opens
        its folder once per process); closing it leaves this store open."""
        other = Store(self.client, collection, self.location, embedded=self.embedded)
        other.owns_client = False
        other.cluster = self.cluster
        return other

    # --- names (kb.ingest.switch: a rebuilt index takes over the searched name) ------------

    def collections(self) -> list[str]:
        """Every collection of this Qdrant, by its own name (aliases not listed)."""
        with self.calls():
            return sorted(c.name for c in self.client.get_collections().collections)

    def target(self) -> str:
        """The collection this store's name is: itself, or the one it is an alias of."""
        with self.calls():
            aliases = self.client.get_aliases().aliases
        return next((a.collection_name for a in aliases if a.alias_name == self.collection),
                    self.collection)  # fmt: skip

    def point_alias(self, target: str) -> str | None:
        """Make this store's name an alias of collection `target`, atomically, and return the
        collection the name was until now (the caller deletes it), None if it named nothing.

        An alias already: one alias update (delete and create in one request: every search
        sees the old collection or the new one). A collection of that name (made before any
        switch): embedded storage lets the alias shadow it, then deletes it; a server cannot
        give an alias the name of a collection, so that one is deleted first and the name is
        missing for the moment between the two requests, once."""
        name = self.collection
        create = models.CreateAliasOperation(
            create_alias=models.CreateAlias(collection_name=target, alias_name=name)
        )
        drop = models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=name))
        before = self.target()
        with self.calls():
            if before != name:
                self.client.update_collection_aliases(change_aliases_operations=[drop, create])
                return before
            existed = self.client.collection_exists(name)
            if existed and not getattr(self.client, "shadowing_aliases", False):
                self.client.delete_collection(name)
            self.client.update_collection_aliases(change_aliases_operations=[create])
        return name if existed else None

    def drop_alias(self) -> None:
        """Remove this store's name if it is an alias (its collection stays)."""
        drop = models.DeleteAliasOperation(
            delete_alias=models.DeleteAlias(alias_name=self.collection)
        )
        with self.calls():
            self.client.update_collection_aliases(change_aliases_operations=[drop])

    def optimize(self) -> bool:
        """Build the vector indexes of embedded storage on Qdrant's engine (kb.store.edge): blocks
        for
        up to minutes, so kb.store.optimize calls it after an ingest, never a search. False: nothing
        to do."""
        optimize = getattr(self.client, "optimize", None)
        if optimize is None:
            return False  # a server optimizes by itself; local mode has no indexes
        with self.calls():
            return bool(optimize(self.collection))

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def calls(self) -> Iterator[None]:
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

    # --- points -----------------------------------------------------------------------

    def replace(self, points: Sequence[Point], sources: Iterable[str]) -> None:
        """Make `points` the only points of `sources`: upsert them, then delete the rest.

        Upserting first means searches never see a note vanish while it is being replaced.
        Every write waits for Qdrant's acknowledgement (wait=True).
        """
        sources = sorted(set(sources))
        with self.calls():
            for i in range(0, len(points), UPSERT_BATCH):
                batch = points[i : i + UPSERT_BATCH]
                self.client.upsert(
                    self.collection,
                    points=[
                        models.PointStruct(id=p.id, vector=_vectors(p), payload=p.payload)
                        for p in batch
                    ],
                    wait=True,
                )
            if sources:
                stale = source_filter(sources)
                stale.must_not = [models.HasIdCondition(has_id=[p.id for p in points])]
                self.client.delete(
                    self.collection, points_selector=models.FilterSelector(filter=stale), wait=True
                )

    def delete_sources(self, sources: Iterable[str]) -> None:
        """Remove every point of these notes."""
        wanted = sorted(set(sources))
        with self.calls():
            for i in range(0, len(wanted), FILTER_BATCH):
                self.client.delete(
                    self.collection,
                    points_selector=models.FilterSelector(
                        filter=source_filter(wanted[i : i + FILTER_BATCH])
                    ),
                    wait=True,
                )

    def soft_delete(self, sources: Iterable[str], cause: str, when: str) -> None:
        """Hide these notes from every search and count, keeping their points (text, vectors)
        with `deleted_at` = when (UTC ISO) and `deleted_cause` = cause."""
        wanted = sorted(set(sources))
        with self.calls():
            for i in range(0, len(wanted), FILTER_BATCH):
                self.client.set_payload(
                    self.collection,
                    payload={DELETED_AT: when, DELETED_CAUSE: cause},
                    points=models.FilterSelector(
                        filter=source_filter(wanted[i : i + FILTER_BATCH])
                    ),
                    wait=True,
                )

    def restore(self, sources: Iterable[str], when: str | None = None) -> None:
        """Make soft-deleted notes searchable again, as they were (no embedding): their
        `deleted_at` and `deleted_cause` are removed; with `when` (a restore by hand, UTC ISO)
        `restored_at` is set, which keeps a sync from deleting them again while their files stay
        away (kb.ingest.plan); without it (their files are back) `restored_at` is removed too."""
        wanted = sorted(set(sources))
        with self.calls():
            for i in range(0, len(wanted), FILTER_BATCH):
                selector = models.FilterSelector(filter=source_filter(wanted[i : i + FILTER_BATCH]))
                keys = [DELETED_AT, DELETED_CAUSE] + ([RESTORED_AT] if when is None else [])
                self.client.delete_payload(self.collection, keys=keys, points=selector, wait=True)
                if when is not None:
                    self.client.set_payload(
                        self.collection, payload={RESTORED_AT: when}, points=selector, wait=True
                    )

    def set_fields(self, values: dict[str, dict[str, Any]]) -> None:
        """Set payload fields on every point of each note (by source), nothing re-embedded: a
        video's refreshed view count (kb.sources.youtube.playlist)."""
        with self.calls():
            for source, payload in sorted(values.items()):
                self.client.set_payload(
                    self.collection,
                    payload=payload,
                    points=models.FilterSelector(filter=source_filter([source])),
                    wait=True,
                )

    def deleted_notes(self, where: models.Filter) -> list[dict[str, Any]]:
        """The lifecycle fields (source, origin, deleted_at, deleted_cause) of the first chunk of
        every note matching `where` (kb.store.query.deleted_filter), by source."""
        first = models.FieldCondition(key=CHUNK_INDEX, match=models.MatchValue(value=0))
        flt = models.Filter(must=[first, where])
        fields = [SOURCE, ORIGIN, DELETED_AT, DELETED_CAUSE]
        found = [r.payload or {} for r in self._scroll(flt, fields)]
        return sorted(found, key=lambda p: str(p.get(SOURCE)))

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
            self._read_fingerprints(origin_filter(origin) if origin else None, out)
            return out
        wanted = sorted(set(sources))
        # a few hundred names per filter keeps each request small for a server
        for i in range(0, len(wanted), FILTER_BATCH):
            self._read_fingerprints(source_filter(wanted[i : i + FILTER_BATCH]), out)
        return out

    def _read_fingerprints(self, flt: models.Filter | None, out: dict[str, dict[str, str]]) -> None:
        for r in self._scroll(flt, [SOURCE, NOTE_HASH, DELETED_AT, RESTORED_AT]):
            payload = r.payload or {}
            source = payload.get(SOURCE)
            if isinstance(source, str):
                note_hash = payload.get(NOTE_HASH)
                mark = (
                    DELETED_MARK
                    if payload.get(DELETED_AT)
                    else RESTORED_MARK
                    if payload.get(RESTORED_AT)
                    else ""
                )
                out.setdefault(source, {})[str(r.id)] = mark + (
                    note_hash if isinstance(note_hash, str) else ""
                )

    def file_stats(self, sources: Iterable[str]) -> dict[str, FileStat]:
        """What ingest recorded of each note's file (kb.core.schema.FileStat), from its first
        chunk; notes stored without it (videos, older points) are left out."""
        first = models.FieldCondition(key=CHUNK_INDEX, match=models.MatchValue(value=0))
        out: dict[str, FileStat] = {}
        wanted = sorted(set(sources))
        for i in range(0, len(wanted), FILTER_BATCH):
            flt = models.Filter(must=[first, source_filter(wanted[i : i + FILTER_BATCH])])
            for r in self._scroll(flt, [SOURCE, *FILE_FIELDS]):
                payload = r.payload or {}
                found = FileStat.stored(payload)
                if found is not None and isinstance(payload.get(SOURCE), str):
                    out[payload[SOURCE]] = found
        return out

    def payloads(self, source: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """(id, payload) of every point (of one source), for checks and maintenance."""
        flt = source_filter([source]) if source is not None else None
        return [(str(r.id), r.payload or {}) for r in self._scroll(flt, True, limit=256)]

    def _scroll(
        self, flt: models.Filter | None, payload: list[str] | bool, *, limit: int = SCROLL_PAGE
    ) -> Iterator[models.Record]:
        """Every point matching `flt`, page by page, with these payload fields."""
        offset = None
        with self.calls():
            while True:
                records, offset = self.client.scroll(
                    self.collection,
                    scroll_filter=flt,
                    limit=limit,
                    offset=offset,
                    with_payload=payload,
                )
                yield from records
                if offset is None:
                    return

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
        one Query API call; `where` (kb.store.query.payload_filter) applies inside each
        prefetch, so fusion only ever sees matching points. `alternates`: more phrasings, fused
        with this one by reciprocal rank in the same call (kb.store.query.request). `fusion`
        merges the two rankings of a hybrid query (the references are for benchmarks).

        With `per_note`, at most that many points per note (grouped by `source` in the same
        call): `limit` distinct notes when per_note is 1. Scores: cosine similarity (dense
        alone), BM25 (keyword alone), or cosine plus a keyword bonus of 0..1 (both: see
        kb.store.query.fusion). Soft-deleted notes are never found. kb.search.query checks the
        collection first (kb.store.collection).
        """
        if dense is None and keyword is None:
            raise ValueError("query needs a dense vector, a keyword vector, or both")
        if keyword is not None and not keyword.indices and dense is None and not alternates:
            return []  # nothing to look for: e.g. a query made only of stopwords
        where = visible(where)
        if per_note and self.embedded:
            return self._collapsed(
                limit, per_note, dense=dense, keyword=keyword, where=where,
                alternates=alternates, fusion=fusion,
            )  # fmt: skip
        search = request(
            limit,
            dense=dense,
            keyword=keyword,
            where=where,
            per_note=per_note,
            alternates=alternates,
            fusion=fusion,
        )
        with self.calls():
            if not per_note:
                response = self.client.query_points(
                    self.collection, limit=limit, with_payload=True, **search
                )
                points = response.points
            else:
                groups = self.client.query_points_groups(
                    self.collection,
                    group_by=SOURCE,
                    group_size=per_note,
                    limit=limit,
                    with_payload=True,
                    **search,
                ).groups
                # best first across notes; sorted() keeps the group order among equal scores
                points = sorted((p for g in groups for p in g.hits), key=lambda p: -p.score)
        return [Hit.from_payload(p.score, p.payload or {}) for p in points[:limit]]

    def _collapsed(
        self,
        limit: int,
        per_note: int,
        *,
        dense: Any,
        keyword: Any,
        where: Any,
        alternates: Sequence[Phrasing] = (),
        fusion: Fusion = HYBRID_FUSION,
    ) -> list[Hit]:
        """What `query_points_groups` returns, for embedded Qdrant (neither engine has it in
        Python): the best chunks, at most `per_note` of each note, from one ranked query deep
        enough to hold them, its prefetches as deep as a server's grouped query makes them.

        The ranking reads only each point's `source`; the payloads of the chunks kept are read
        after (bench/scale.py: the ranked query is most of the time, and its cost grows with
        how many points it returns).
        """
        fetch = PREFETCH_FACTOR * limit * per_note
        depth = grouped_depth(limit, per_note)
        while True:
            search = request(
                fetch,
                dense=dense,
                keyword=keyword,
                where=where,
                per_note=None,
                alternates=alternates,
                depth=max(depth, fetch),
                fusion=fusion,
            )
            with self.calls():
                points = self.client.query_points(
                    self.collection, limit=fetch, with_payload=[SOURCE], **search
                ).points
            kept: list[tuple[str, float]] = []
            taken: dict[Any, int] = {}
            for p in points:
                source = (p.payload or {}).get(SOURCE)
                if source is None or taken.get(source, 0) >= per_note:
                    continue  # as the server does, a point without a source joins no group
                taken[source] = taken.get(source, 0) + 1
                kept.append((str(p.id), p.score))
                if len(kept) == limit:
                    break
            if len(kept) == limit or len(points) < fetch:
                # enough notes, or the whole (filtered) collection was ranked
                return self._hits(kept)
            fetch *= 4  # a few notes hold most of the best chunks: look deeper

    def _hits(self, scored: Sequence[tuple[str, float]]) -> list[Hit]:
        """Hits for (point id, score) pairs, in their order, with the points' payloads."""
        if not scored:
            return []
        with self.calls():
            records = self.client.retrieve(
                self.collection, [i for i, _ in scored], with_payload=True
            )
        payloads = {str(r.id): r.payload or {} for r in records}
        # a point deleted since it was ranked has no payload left: it is no hit any more
        return [Hit.from_payload(s, payloads[i]) for i, s in scored if i in payloads]

    def note_counts(self, key: str) -> tuple[int, list[tuple[str, int]]]:
        """Live (not soft-deleted) notes: how many, and per value of payload field `key` (e.g.
        `origin`; notes stored without the field are only in the total)."""
        first_chunks = models.Filter(
            must=[models.FieldCondition(key=CHUNK_INDEX, match=models.MatchValue(value=0))]
        )
        with self.calls():
            total = self.client.count(
                self.collection, count_filter=visible(first_chunks), exact=True
            ).count
            response = self.client.facet(
                self.collection, key=key, facet_filter=visible(first_chunks), limit=10_000,
                exact=True,
            )  # fmt: skip
        return total, [(str(hit.value), hit.count) for hit in response.hits]

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
        Soft-deleted
        notes are never listed; a point without the field is not listed either.

        A field with a range index (integer, datetime: kb.core.schema.PAYLOAD_INDEXES) is ordered by
        Qdrant (scroll with order_by, which takes no offset: the first offset+limit are read);
        any other (title) is ordered here, reading that field alone of every matching point.
        Another engine behind Store implements this and `count` alike.
        """
        where = visible(where)
        with self.calls():
            if order_by in PAYLOAD_INDEXES and PAYLOAD_INDEXES[order_by] != KEYWORD_INDEX:
                direction = models.Direction.DESC if descending else models.Direction.ASC
                records, _ = self.client.scroll(
                    self.collection,
                    scroll_filter=where,
                    limit=offset + limit,
                    order_by=models.OrderBy(key=order_by, direction=direction),
                    with_payload=True,
                )
                page = records[offset:]
            else:
                keys = [
                    ((r.payload or {}).get(order_by), str(r.id))
                    for r in self._scroll(where, [order_by])
                ]
                ordered = sorted(
                    ((str(v).casefold(), i) for v, i in keys if isinstance(v, str)),
                    reverse=descending,
                )
                ids = [i for _, i in ordered[offset : offset + limit]]
                found = {
                    str(r.id): r
                    for r in self.client.retrieve(self.collection, ids, with_payload=True)
                }
                page = [found[i] for i in ids if i in found]
        return [Hit.from_payload(0.0, r.payload or {}) for r in page]

    def count(self, where: models.Filter | None = None) -> int:
        """How many points match `where` (soft-deleted notes' never), exactly."""
        with self.calls():
            return self.client.count(self.collection, count_filter=visible(where), exact=True).count

    def tag_counts(
        self, limit: int = 10_000, *, per: Literal["note", "chunk"] = "note"
    ) -> list[tuple[str, int]]:
        """(tag, number of notes carrying it), or with per="chunk" (tag, number of chunks),
        most used first, then alphabetical; soft-deleted notes are not counted."""
        if per not in ("note", "chunk"):
            raise ValueError(f"per must be 'note' or 'chunk', got {per!r}")
        # every note has exactly one chunk 0, so counting those counts notes, not chunks
        first_chunks = models.Filter(
            must=[models.FieldCondition(key=CHUNK_INDEX, match=models.MatchValue(value=0))]
        )
        where = visible(first_chunks if per == "note" else None)
        with self.calls():
            response = self.client.facet(
                self.collection, key=TAGS, facet_filter=where, limit=limit, exact=True
            )
        counts = [(str(hit.value), hit.count) for hit in response.hits]
        return sorted(counts, key=lambda tc: (-tc[1], tc[0]))


def _vectors(point: Point) -> dict[str, Any]:
    vectors: dict[str, Any] = {DENSE: point.vector}
    if point.keyword is not None:
        vectors[KEYWORD] = sparse_vector(point.keyword)
    return vectors
