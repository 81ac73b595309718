"""The only module that talks to Qdrant: a server (QDRANT_URL) or embedded storage (QDRANT_PATH).

One collection holds one point per chunk: a named dense vector (`dense`), a sparse keyword vector
(`keyword`, BM25 term weights whose IDF half Qdrant applies from live collection statistics)
and the chunk's payload. The collection's metadata records the embedding model and dimension
that made it, so a different embedder is refused instead of silently mixing vector spaces.
Point ids are derived from (source, chunk index), so re-ingesting a note overwrites its points
instead of adding copies.

A search is one Query API call: dense and keyword prefetches (each filtered), fused by a score
formula, optionally grouped by note (`query_points_groups`, group_by source); kb.qdrant_query
builds the request.
"""

from __future__ import annotations

import fcntl
import uuid
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from kb.qdrant_query import DENSE, KEYWORD, PREFETCH_FACTOR, request, sparse_vector
from kb.settings import Settings
from kb.sparse import Sparse

SCHEMA_VERSION = 2  # payload layout, recorded in the collection metadata (2: keyword, folders)
UPSERT_BATCH = 256  # points per upsert request: keeps server requests well under its size limit
SCROLL_PAGE = 2048  # points per scroll page when only a few small payload fields are read
FILTER_BATCH = 500  # note names per `source` filter

# Every field a filter or facet uses. A server needs these; embedded mode ignores them.
PAYLOAD_INDEXES: dict[str, models.PayloadSchemaType] = {
    "source": models.PayloadSchemaType.KEYWORD,
    "folders": models.PayloadSchemaType.KEYWORD,  # every folder above the note (path filter)
    "tags": models.PayloadSchemaType.KEYWORD,
    "chunk_index": models.PayloadSchemaType.INTEGER,
    "document_date": models.PayloadSchemaType.DATETIME,
    "date_ingested": models.PayloadSchemaType.DATETIME,
}

_ID_NAMESPACE = uuid.UUID("6f1d7a52-3c1e-4b5f-9a57-0c3e2b8f4d11")


class StoreError(Exception):
    """Qdrant cannot do what was asked; the message says what to do about it."""


class StoreUnavailable(StoreError):
    """The server is unreachable, or the embedded folder is held by another process."""


class CollectionMissing(StoreError):
    """The collection does not exist yet (nothing ingested)."""


class ModelMismatch(StoreError):
    """The collection was built by another embedding model or dimension."""


class KeywordIndexMissing(StoreError):
    """The collection was built by an older version, without keyword vectors."""


@dataclass(frozen=True)
class Point:
    id: str
    vector: list[float]  # the dense vector
    payload: dict[str, Any]
    keyword: Sparse | None = None  # the keyword vector (kb.sparse.document_vector)


@dataclass(frozen=True)
class Match:
    id: str
    score: float
    payload: dict[str, Any]


@dataclass(frozen=True)
class CollectionModel:
    model: str | None  # None: made without our metadata (unknown model)
    dimensions: int
    points: int
    rebuild_incomplete: bool  # a full (re)build started and has not finished yet
    keyword: bool = True  # has the keyword vector (False: made by an older version)
    schema_version: int | None = None  # payload layout (SCHEMA_VERSION of the version that made it)

    def current(self, model: str, dimensions: int) -> bool:
        """Made for `model` by this version's layout: a rebuild can update it in place."""
        return (
            self.model == model
            and self.dimensions == dimensions
            and self.keyword
            and self.schema_version == SCHEMA_VERSION
        )


def point_id(source: str, chunk_index: int) -> str:
    """Deterministic point id of a note's chunk (a UUID, as Qdrant requires)."""
    return str(uuid.uuid5(_ID_NAMESPACE, f"{source}\x00{chunk_index}"))


def source_filter(sources: Iterable[str]) -> models.Filter:
    return models.Filter(
        must=[models.FieldCondition(key="source", match=models.MatchAny(any=list(sources)))]
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


class Store:
    """One collection in one Qdrant. Build with `Store.open(settings)`; close when done."""

    def __init__(
        self, client: QdrantClient, collection: str, location: str, *, embedded: bool = False
    ) -> None:
        self.client = client
        self.collection = collection
        self.location = location  # "Qdrant at URL" or "embedded Qdrant in PATH", for messages
        self.embedded = embedded  # qdrant-client's local mode (QDRANT_PATH), not a server
        self._checked: tuple[str, int] | None = None
        self._keyword = False  # the collection is known to have the keyword vector

    @classmethod
    def open(cls, settings: Settings, collection: str | None = None) -> Store:
        """Connect as the settings say: QDRANT_PATH (embedded) if set, else QDRANT_URL.

        Raises StoreUnavailable when the server does not answer or the folder is in use.
        """
        name = collection or settings.COLLECTION
        if settings.QDRANT_PATH:
            path = Path(settings.QDRANT_PATH).expanduser().resolve()
            location = f"embedded Qdrant in {path} (QDRANT_PATH)"
            busy = StoreUnavailable(
                f"{location} is in use by another process (the MCP server or another "
                "ingest?); stop it first, or run Qdrant as a server and set QDRANT_URL"
            )
            # checked first: a refused QdrantClient(path=...) leaks its lock file handle
            if _folder_locked(path):
                raise busy
            try:
                client = QdrantClient(path=str(path))
            except RuntimeError as exc:
                if "already accessed" not in str(exc):
                    raise
                raise busy from None
            return cls(client, name, location, embedded=True)
        location = f"Qdrant at {settings.QDRANT_URL} (QDRANT_URL)"
        client = QdrantClient(
            url=settings.QDRANT_URL,
            api_key=settings.QDRANT_API_KEY or None,
            check_compatibility=False,  # it warns from a thread; we probe below instead
        )
        store = cls(client, name, location)
        with store._calls():
            client.get_collections()  # fail now, with a clear message, when it is down
        return store

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _calls(self) -> Iterator[None]:
        try:
            yield
        except ResponseHandlingException as exc:
            raise StoreUnavailable(
                f"{self.location} is unreachable ({exc.source}); is it running?"
            ) from None
        except UnexpectedResponse as exc:
            detail = exc.content.decode("utf-8", "replace")[:300]
            raise StoreError(f"{self.location} answered HTTP {exc.status_code}: {detail}") from None

    # --- collection -------------------------------------------------------------------

    def exists(self) -> bool:
        with self._calls():
            return self.client.collection_exists(self.collection)

    def collection_model(self) -> CollectionModel | None:
        """Which model and dimension built the collection; None when it does not exist."""
        if not self.exists():
            return None
        with self._calls():
            info = self.client.get_collection(self.collection)
        vectors = info.config.params.vectors
        if not isinstance(vectors, dict) or DENSE not in vectors:
            raise ModelMismatch(
                f"collection '{self.collection}' in {self.location} has no '{DENSE}' vector "
                "(made by another tool or version); re-create it with `uv run ingest.py --rebuild`"
            )
        meta = info.config.metadata or {}
        model = meta.get("embed_model")
        sparse = info.config.params.sparse_vectors
        schema = meta.get("schema_version")
        return CollectionModel(
            model=model if isinstance(model, str) else None,
            dimensions=vectors[DENSE].size,
            points=info.points_count or 0,
            rebuild_incomplete=meta.get("rebuild_incomplete") is True,
            keyword=isinstance(sparse, dict) and KEYWORD in sparse,
            schema_version=schema if isinstance(schema, int) else None,
        )

    def create(self, model: str, dimensions: int, *, rebuilding: bool = False) -> None:
        """Create the collection for `model`'s vectors, with every payload index a filter uses.

        `rebuilding` marks it incomplete until `mark_complete()`, so an interrupted full build
        is finished by the next ingest.
        """
        with self._calls():
            self.client.create_collection(
                self.collection,
                vectors_config={
                    DENSE: models.VectorParams(size=dimensions, distance=models.Distance.COSINE)
                },
                # IDF from live statistics: document frequencies stay right as notes come and go
                sparse_vectors_config={
                    KEYWORD: models.SparseVectorParams(modifier=models.Modifier.IDF)
                },
                metadata={
                    "embed_model": model,
                    "embed_dimensions": dimensions,
                    "schema_version": SCHEMA_VERSION,
                    "rebuild_incomplete": rebuilding,
                },
            )
        self.create_indexes()
        self._checked = (model, dimensions)
        self._keyword = True

    def create_indexes(self) -> None:
        """Create the payload indexes filters and facets need (idempotent)."""
        with self._calls(), warnings.catch_warnings():
            # embedded mode warns that it ignores payload indexes; a server needs them
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            for field, schema in PAYLOAD_INDEXES.items():
                self.client.create_payload_index(
                    self.collection, field, field_schema=schema, wait=True
                )

    def mark_complete(self, complete: bool = True) -> None:
        """Record that a full build finished (see `create`), or with False that one started."""
        with self._calls():
            self.client.update_collection(
                self.collection, metadata={"rebuild_incomplete": not complete}
            )

    def ensure(self, model: str, dimensions: int) -> bool:
        """Create the collection if missing, else check it was made by this model.

        Returns True when it was created. Raises ModelMismatch (telling to --rebuild).
        """
        if self.collection_model() is None:
            self.create(model, dimensions)
            return True
        self.check_model(model, dimensions)
        # also after an interrupted create, or when a newer version indexes more fields
        self.create_indexes()
        return False

    def require(self) -> CollectionModel:
        """The collection's model info; CollectionMissing when nothing was ingested yet."""
        found = self.collection_model()
        if found is None:
            raise CollectionMissing(
                f"collection '{self.collection}' does not exist in {self.location}; "
                "ingest notes first: uv run ingest.py"
            )
        return found

    def check_model(self, model: str, dimensions: int) -> None:
        """Raise CollectionMissing / ModelMismatch unless `model` can search and extend it."""
        if self._checked == (model, dimensions):
            return
        found = self.require()
        if found.dimensions != dimensions or (found.model and found.model != model):
            made_by = f"{found.model or 'an unknown model'} ({found.dimensions}-d)"
            raise ModelMismatch(
                f"collection '{self.collection}' was built with {made_by} but the embedder "
                f"serves {model} ({dimensions}-d); re-embed everything with "
                "`uv run ingest.py --rebuild` (make ingest-rebuild)"
            )
        self._checked = (model, dimensions)

    def require_keyword(self) -> None:
        """Raise KeywordIndexMissing (telling to --rebuild) for a collection made by a version
        without keyword vectors; CollectionMissing when there is none."""
        if self._keyword:
            return
        if not self.require().keyword:
            raise KeywordIndexMissing(
                f"collection '{self.collection}' in {self.location} was built by an older "
                "version without keyword vectors, which ingest, keyword and hybrid search need; "
                "re-create it with `uv run ingest.py --rebuild` (make ingest-rebuild). Semantic "
                "search works on it meanwhile (mode semantic)"
            )
        self._keyword = True  # only a positive answer is kept: a rebuild can add it later

    def drop(self) -> bool:
        """Delete the collection and its points; True if it existed."""
        self._checked = None
        self._keyword = False
        with self._calls():
            if not self.client.collection_exists(self.collection):
                return False
            return self.client.delete_collection(self.collection)

    # --- points -----------------------------------------------------------------------

    def replace(self, points: Sequence[Point], sources: Iterable[str]) -> None:
        """Make `points` the only points of `sources`: upsert them, then delete the rest.

        Upserting first means searches never see a note vanish while it is being replaced.
        Every write waits for Qdrant's acknowledgement (wait=True).
        """
        sources = sorted(set(sources))
        with self._calls():
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

    def delete_source(self, source: str) -> None:
        """Remove every point of one note."""
        self.delete_sources([source])

    def delete_sources(self, sources: Iterable[str]) -> None:
        """Remove every point of these notes."""
        wanted = sorted(set(sources))
        with self._calls():
            for i in range(0, len(wanted), FILTER_BATCH):
                self.client.delete(
                    self.collection,
                    points_selector=models.FilterSelector(
                        filter=source_filter(wanted[i : i + FILTER_BATCH])
                    ),
                    wait=True,
                )

    def fingerprints(self, sources: Iterable[str] | None = None) -> dict[str, dict[str, str]]:
        """{source: {point id: its note's fingerprint}} for every stored point (of `sources`).

        The fingerprint (payload `note_hash`, see kb.ingest) says which version of a note the
        point was written from, so ingest can leave a note whose points would not change alone.
        A point without one (written by an older version) maps to "".
        """
        out: dict[str, dict[str, str]] = {}
        if sources is None:
            self._read_fingerprints(None, out)
            return out
        wanted = sorted(set(sources))
        # a few hundred names per filter keeps each request small for a server
        for i in range(0, len(wanted), FILTER_BATCH):
            self._read_fingerprints(source_filter(wanted[i : i + FILTER_BATCH]), out)
        return out

    def _read_fingerprints(self, flt: models.Filter | None, out: dict[str, dict[str, str]]) -> None:
        offset = None
        with self._calls():
            while True:
                records, offset = self.client.scroll(
                    self.collection,
                    scroll_filter=flt,
                    limit=SCROLL_PAGE,
                    offset=offset,
                    with_payload=["source", "note_hash"],
                )
                for r in records:
                    payload = r.payload or {}
                    source = payload.get("source")
                    if isinstance(source, str):
                        note_hash = payload.get("note_hash")
                        out.setdefault(source, {})[str(r.id)] = (
                            note_hash if isinstance(note_hash, str) else ""
                        )
                if offset is None:
                    return

    def count(self, source: str | None = None) -> int:
        flt = source_filter([source]) if source is not None else None
        with self._calls():
            return self.client.count(self.collection, count_filter=flt, exact=True).count

    def payloads(self, source: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """(id, payload) of every point (of one source), for checks and maintenance."""
        flt = source_filter([source]) if source is not None else None
        out: list[tuple[str, dict[str, Any]]] = []
        offset = None
        with self._calls():
            while True:
                records, offset = self.client.scroll(
                    self.collection, scroll_filter=flt, limit=256, offset=offset
                )
                out.extend((str(r.id), r.payload or {}) for r in records)
                if offset is None:
                    return out

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """Stored dense vectors by point id."""
        with self._calls():
            records = self.client.retrieve(self.collection, ids=list(ids), with_vectors=[DENSE])
        return {str(r.id): list(r.vector[DENSE]) for r in records}  # type: ignore[index]

    def query(
        self,
        limit: int,
        *,
        dense: Sequence[float] | None = None,
        keyword: Sparse | None = None,
        where: models.Filter | None = None,
        per_note: int | None = None,
    ) -> list[Match]:
        """The best `limit` points for a dense vector, a keyword vector, or both (hybrid), in
        one Query API call; `where` (kb.qdrant_query.payload_filter) applies inside each
        prefetch, so fusion only ever sees matching points.

        With `per_note`, at most that many points per note (grouped by `source` in the same
        call): `limit` distinct notes when per_note is 1. Scores: cosine similarity (dense
        alone), BM25 (keyword alone), or cosine plus a keyword bonus of 0..1 (both: see
        kb.qdrant_query.fusion). Raises KeywordIndexMissing for a keyword vector on a collection
        built without them.
        """
        if dense is None and keyword is None:
            raise ValueError("query needs a dense vector, a keyword vector, or both")
        if keyword is not None:
            self.require_keyword()
            if not keyword.indices and dense is None:
                return []  # nothing to look for: e.g. a query made only of stopwords
        if per_note and self.embedded:
            return self._collapsed(limit, per_note, dense=dense, keyword=keyword, where=where)
        search = request(limit, dense=dense, keyword=keyword, where=where, per_note=per_note)
        with self._calls():
            if not per_note:
                response = self.client.query_points(
                    self.collection, limit=limit, with_payload=True, **search
                )
                points = response.points
            else:
                groups = self.client.query_points_groups(
                    self.collection,
                    group_by="source",
                    group_size=per_note,
                    limit=limit,
                    with_payload=True,
                    **search,
                ).groups
                # best first across notes; sorted() keeps the group order among equal scores
                points = sorted((p for g in groups for p in g.hits), key=lambda p: -p.score)
        return [Match(str(p.id), p.score, p.payload or {}) for p in points[:limit]]

    def _collapsed(
        self, limit: int, per_note: int, *, dense: Any, keyword: Any, where: Any
    ) -> list[Match]:
        """What `query_points_groups` returns, for embedded Qdrant: the best chunks, at most
        `per_note` of each note, from one ranked query deep enough to hold them.

        Embedded Qdrant groups by prefetching the whole collection and scoring every point in
        Python (a hybrid query on 1,755 chunks: 640 ms grouped against 180 ms for the plain
        query); a server groups natively, so it gets `query_points_groups`.
        """
        fetch = PREFETCH_FACTOR * limit * per_note
        while True:
            search = request(fetch, dense=dense, keyword=keyword, where=where, per_note=None)
            with self._calls():
                points = self.client.query_points(
                    self.collection, limit=fetch, with_payload=True, **search
                ).points
            kept: list[Match] = []
            taken: dict[Any, int] = {}
            for p in points:
                source = (p.payload or {}).get("source")
                if source is None or taken.get(source, 0) >= per_note:
                    continue  # as the server does, a point without a source joins no group
                taken[source] = taken.get(source, 0) + 1
                kept.append(Match(str(p.id), p.score, p.payload or {}))
                if len(kept) == limit:
                    return kept
            if len(points) < fetch:
                return kept  # the whole (filtered) collection was ranked
            fetch *= 4  # a few notes hold most of the best chunks: look deeper

    def tag_counts(
        self, limit: int = 10_000, *, per: Literal["note", "chunk"] = "note"
    ) -> list[tuple[str, int]]:
        """(tag, number of notes carrying it), or with per="chunk" (tag, number of chunks),
        most used first, then alphabetical."""
        if per not in ("note", "chunk"):
            raise ValueError(f"per must be 'note' or 'chunk', got {per!r}")
        # every note has exactly one chunk 0, so counting those counts notes, not chunks
        first_chunks = models.Filter(
            must=[models.FieldCondition(key="chunk_index", match=models.MatchValue(value=0))]
        )
        where = first_chunks if per == "note" else None
        with self._calls():
            response = self.client.facet(
                self.collection, key="tags", facet_filter=where, limit=limit, exact=True
            )
        counts = [(str(hit.value), hit.count) for hit in response.hits]
        return sorted(counts, key=lambda tc: (-tc[1], tc[0]))


def _vectors(point: Point) -> dict[str, Any]:
    vectors: dict[str, Any] = {DENSE: point.vector}
    if point.keyword is not None:
        vectors[KEYWORD] = sparse_vector(point.keyword)
    return vectors
