"""Model changes without downtime: a new index is built beside the one searches use, and takes
over its name atomically once complete.

When the embedder's model (EMBED_MODEL, or CODE_EMBED_MODEL for the code collection), its
dimension or the chunker (kb.content.chunking.CHUNKER_VERSION) differ from what built a
collection, `begin` gives the run a collection beside it instead (`<name>--<8 hex>`, named by
what it is built for, its metadata `switch_of: <name>`): the run fills it as a full build,
reusing the embedding cache for every text embedded before with that model, while searches
keep reading `<name>` (kb.search.query asks the embedder for the model that built it: searches
keep working as long as the embedder serves it too, EMBED_PREVIOUS_MODEL). `finish`, called once
a run has synced every source, makes `<name>` an alias of the new collection (kb.store.points.
Store.point_alias: one alias update on a server; embedded storage the same, from its own alias
file) and deletes the old one. A run that stops midway leaves the new collection to be resumed
by the next (its notes already written are unchanged, so only the rest is embedded); a model
changed back before the switch drops it (and the live one then re-lists everything once, since
inbox notes ingested meanwhile went only into the new one).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from kb.content.chunking import CHUNKER_VERSION
from kb.core.errors import EmbedError, ModelMismatch
from kb.core.schema import SCHEMA_VERSION
from kb.embedding.client import EmbedClient
from kb.store import collection
from kb.store.collection import CollectionInfo
from kb.store.points import Store

log = logging.getLogger(__name__)
SEPARATOR = "--"


def build_name(name: str, model: str, dimensions: int) -> str:
    """The collection built beside `name` for this model, dimension and chunker."""
    key = f"{model}\0{dimensions}\0{CHUNKER_VERSION}\0{SCHEMA_VERSION}"
    return f"{name}{SEPARATOR}{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def current(info: CollectionInfo, model: str, dimensions: int) -> bool:
    """Made for this model, dimension and chunker, with keyword vectors: no switch needed."""
    return (
        info.model in (None, model)
        and info.dimensions == dimensions
        and (info.chunker_version or 1) == CHUNKER_VERSION
        and info.keyword
    )


def builds(store: Store) -> list[str]:
    """The collections being built to take over `store`'s name."""
    prefix = store.collection + SEPARATOR
    found = []
    for name in store.collection_names():
        if name.startswith(prefix) and name != store.target():
            made = collection.info(store.beside(name))
            if made is not None and made.switch_of == store.collection:
                found.append(name)
    return found


@dataclass(frozen=True)
class Progress:
    """A switch under way: what `status` shows."""

    collection: str  # the one being built
    model: str | None  # what it is built for
    from_model: str | None  # what the searched one was built with
    notes: int  # notes embedded into it so far
    of: int  # notes the searched one holds


def progress(store: Store) -> Progress | None:
    """The switch under way for `store`'s name, if any."""
    found = builds(store)
    live = collection.info(store)
    if not found or live is None:
        return None
    build = store.beside(found[0])
    made = collection.info(build)
    written, _ = build.note_counts("origin")
    # a note stored by its words alone (words first) is not yet built for the new model
    done = written - build.unembedded(notes=True)
    total, _ = store.note_counts("origin")
    return Progress(found[0], made.model if made else None, live.model, done, total)


def begin(store: Store, client: EmbedClient) -> Store:
    """The store a run writes to: `store` when its collection suits the embedder (or does not
    exist yet), else the collection built beside it (created now, or resumed)."""
    try:
        live = collection.info(store)
    except ModelMismatch:
        return store  # another tool's collection: the run says so
    if live is None:
        return store
    try:
        model, dimensions = client.model, client.dimensions
    except EmbedError:
        return store  # nothing to decide without the embedder; the run fails if it needs it
    name = build_name(store.collection, model, dimensions)
    if current(live, model, dimensions):
        for left in builds(store):  # the model was changed back before a switch finished
            log.info("%s: dropping the unfinished rebuild %s", store.collection, left)
            collection.drop(store.beside(left))
            collection.mark_complete(store, False)  # list everything once: see the docstring
        return store
    for left in builds(store):
        if left != name:  # built for yet another model
            collection.drop(store.beside(left))
    build = store.beside(name)
    if collection.info(build) is None:
        log.info("%s was built with %s; building %s beside it for %s", store.collection,
                 live.model, name, model)  # fmt: skip
        collection.create(build, model, dimensions, rebuilding=True,
                          metadata={"switch_of": store.collection,
                                    "chunker_version": CHUNKER_VERSION})  # fmt: skip
    else:
        log.info("%s: resuming the rebuild in %s", store.collection, name)
    return build


def finish(live: Store, build: Store) -> bool:
    """Make `live`'s name the rebuilt collection `build` and delete the one it was; False when
    there is nothing to switch (`build` is `live`)."""
    if build is live or build.collection == live.collection:
        return False
    collection.update(build, {"switch_of": "", "rebuild_incomplete": False})
    before = live.point_alias(build.collection)
    live.checked_model, live.has_keyword = None, False
    if before is not None and before != build.collection:
        collection.delete(live, before)
    now = collection.info(live)
    log.info("%s now searches %s (%s)", live.collection, build.collection,
             now.model if now else "?")  # fmt: skip
    return True
