"""The collection's life: create it with its vectors and indexes, check that it was made by the
embedder in use, and decide what an ingest run does with it (keep, update in place, re-create).

The collection's metadata records the embedding model and dimension that made it, the payload
layout (kb.core.schema.SCHEMA_VERSION) and whether a full build is under way, so a different
embedder
is refused instead of silently mixing vector spaces, and an interrupted full build is finished
by the next run. The Store (kb.store.points) carries these operations to its engine and reads
and writes the points.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kb.core.errors import CollectionMissing, KeywordIndexMissing, ModelMismatch
from kb.core.schema import DENSE, KEYWORD, PAYLOAD_INDEXES, SCHEMA_VERSION
from kb.store.models import models
from kb.store.points import Store

log = logging.getLogger(__name__)
REBUILD_HINT = "`uv run ingest.py --rebuild` (make ingest-rebuild)"


@dataclass(frozen=True)
class CollectionInfo:
    model: str | None  # None: made without our metadata (unknown model)
    dimensions: int
    points: int
    rebuild_incomplete: bool  # a full (re)build started and has not finished yet
    keyword: bool = True  # has the keyword vector (False: made by an older version)
    schema_version: int | None = None  # payload layout of the version that made it
    chunker_version: int | None = None  # kb.content.chunking.CHUNKER_VERSION (None: before it)
    switch_of: str | None = None  # the name it is being built to take over (kb.ingest.switch)

    def current(self, model: str, dimensions: int) -> bool:
        """Made for `model` by this version's layout: a rebuild can update it in place."""
        return (
            self.model == model
            and self.dimensions == dimensions
            and self.keyword
            and self.schema_version == SCHEMA_VERSION
        )


def info(store: Store) -> CollectionInfo | None:
    """Which model and layout built the collection; None when it does not exist. ModelMismatch
    for a collection without our dense vector (made by another tool)."""
    if not store.exists():
        return None
    found = store.describe()
    if DENSE not in found.dense:
        raise ModelMismatch(
            f"collection '{store.collection}' in {store.location} has no '{DENSE}' vector "
            f"(made by another tool or version); re-create it with {REBUILD_HINT}"
        )
    meta = found.metadata
    model = meta.get("embed_model")
    schema = meta.get("schema_version")
    chunker, switch_of = meta.get("chunker_version"), meta.get("switch_of")
    return CollectionInfo(
        model=model if isinstance(model, str) else None,
        dimensions=found.dense[DENSE].size,
        points=found.points,
        rebuild_incomplete=meta.get("rebuild_incomplete") is True,
        keyword=KEYWORD in found.sparse,
        schema_version=schema if isinstance(schema, int) else None,
        chunker_version=chunker if isinstance(chunker, int) else None,
        switch_of=switch_of if isinstance(switch_of, str) and switch_of else None,
    )


def require(store: Store) -> CollectionInfo:
    """The collection's info; CollectionMissing when nothing was ingested yet."""
    found = info(store)
    if found is None:
        raise CollectionMissing(
            f"collection '{store.collection}' does not exist in {store.location}; "
            "ingest notes first: uv run ingest.py"
        )
    return found


def check_model(store: Store, model: str, dimensions: int) -> None:
    """Raise CollectionMissing / ModelMismatch unless `model` can search and extend it."""
    if store.checked_model == (model, dimensions):
        return
    found = require(store)
    if found.dimensions != dimensions or (found.model and found.model != model):
        made_by = f"{found.model or 'an unknown model'} ({found.dimensions}-d)"
        raise ModelMismatch(
            f"collection '{store.collection}' was built with {made_by} but the embedder "
            f"serves {model} ({dimensions}-d) for it; `uv run ingest.py` rebuilds it for "
            f"{model} beside the old one (searches use the old one meanwhile if the embedder "
            f"also serves {found.model or 'that model'} as EMBED_PREVIOUS_MODEL; keyword mode "
            "needs no model)"
        )
    store.checked_model = (model, dimensions)


def require_keyword(store: Store) -> None:
    """KeywordIndexMissing (telling to rebuild) for a collection made by a version without
    keyword vectors; CollectionMissing when there is none."""
    if store.has_keyword:
        return
    if not require(store).keyword:
        raise KeywordIndexMissing(
            f"collection '{store.collection}' in {store.location} was built by an older "
            "version without keyword vectors, which ingest, keyword and hybrid search need; "
            f"re-create it with {REBUILD_HINT}. Semantic search works on it meanwhile "
            "(mode semantic)"
        )
    store.has_keyword = True  # only a positive answer is kept: a rebuild can add it later


def create(
    store: Store,
    model: str,
    dimensions: int,
    *,
    rebuilding: bool = False,
    metadata: dict[str, object] | None = None,
) -> None:
    """Create the collection for `model`'s vectors, with every payload index a filter uses.

    `rebuilding` marks it incomplete until `mark_complete`, so an interrupted full build is
    finished by the next ingest. `metadata`: more of it (kb.ingest.switch: the chunker's
    version, the name it is built to take over).
    """
    store.create_collection(
        dense={DENSE: models.VectorParams(size=dimensions, distance=models.Distance.COSINE)},
        # IDF from live statistics: document frequencies stay right as notes come and go
        sparse={KEYWORD: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        metadata={
            "embed_model": model,
            "embed_dimensions": dimensions,
            "schema_version": SCHEMA_VERSION,
            "rebuild_incomplete": rebuilding,
            **(metadata or {}),
        },
    )
    create_indexes(store)
    store.checked_model = (model, dimensions)
    store.has_keyword = True


def create_indexes(store: Store) -> None:
    """Create the payload indexes filters and facets need (idempotent)."""
    for field, kind in PAYLOAD_INDEXES.items():
        store.create_index(field, kind)


def mark_complete(store: Store, complete: bool = True) -> None:
    """Record that a full build finished (see `create`), or with False that one started."""
    update(store, {"rebuild_incomplete": not complete})


def update(store: Store, metadata: dict[str, object]) -> None:
    """Set these metadata keys of the collection (the others stay)."""
    store.update_metadata(metadata)


def drop(store: Store) -> bool:
    """Delete the collection and its points (an alias: it and its collection); True if it
    existed."""
    store.checked_model = None
    store.has_keyword = False
    target = store.target()
    if target == store.collection:
        return store.drop_collection()
    store.drop_alias()
    return store.beside(target).drop_collection()


def delete(store: Store, name: str) -> bool:
    """Delete the collection `name` of `store`'s Qdrant by its own name (never an alias's)."""
    return store.beside(name).drop_collection()


# --- what an ingest run does with the collection -------------------------------------------


@dataclass
class Build:
    """An ingest run's view of the collection, from `start_build`."""

    existing: CollectionInfo | None
    rebuild: bool  # the user asked for a full rebuild

    @property
    def full(self) -> bool:
        """Index everything the source holds: asked for, a new collection (e.g. its storage was
        deleted), or an earlier full build was interrupted."""
        return self.rebuild or self.existing is None or self.existing.rebuild_incomplete


def start_build(store: Store, *, rebuild: bool) -> Build:
    try:
        existing = info(store)
    except ModelMismatch:
        if not rebuild:
            raise
        existing = None  # made by another tool: a rebuild re-creates it
    build = Build(existing, rebuild)
    if build.full and not rebuild:
        log.info("collection %s is new or incomplete: indexing everything", store.collection)
    return build


def ready_for_writes(
    store: Store, build: Build, model: str, dimensions: int, *, refilling: bool
) -> bool:
    """Make the collection ready for this run's writes; True when it is new (empty).

    A rebuild for another model or layout re-creates it; otherwise it is checked against the
    embedder and gets any index a newer version added. `refilling`: the run writes notes
    stored before (a full build), so a new collection stays flagged incomplete until
    `finish_build`.
    """
    existing = build.existing
    if build.rebuild and existing is not None and not existing.current(model, dimensions):
        existing = None  # another model or layout: re-create it from scratch
    if existing is None:
        drop(store)
        create(store, model, dimensions, rebuilding=refilling)
        return True
    check_model(store, model, dimensions)
    require_keyword(store)  # refuses a collection made by an older version
    create_indexes(store)  # after an interrupted create, or new index fields
    if build.full and not existing.rebuild_incomplete:
        mark_complete(store, False)
    return False


def finish_build(store: Store, build: Build) -> None:
    if build.full:
        mark_complete(store)
