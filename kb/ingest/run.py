"""Ingest: a source's notes -> chunks -> embedder -> Qdrant, then the source's after-store hook.

A run (1) takes the ingest lock, (2) reads and chunks every listed note first, so bad
frontmatter in the inbox stops the run before anything is written (a folder's note fails alone,
kb.ingest.prepare) and progress knows the total, (3) plans with kb.ingest.plan which notes changed,
(4)
embeds those in groups (vectors by content hash from kb.embedding.cache) and writes each group's
points with wait=True, deleting the notes' stale chunks, and (5) only then calls the source's
`after_store` for the group (the inbox moves the files into ingested/). A run killed at any
point leaves every note either still to do (re-ingested next run, overwriting its points: ids
are deterministic) or stored and done.

A NOTE_FOLDERS folder is synced in full each run (its listing is complete): only its own
stored notes (payload `origin`) are compared with it; a note whose file is gone is soft-deleted
(hidden, kept), one whose file comes back unchanged is restored without embedding. A sync that
would soft-delete more than NOTE_FOLDERS_MAX_DELETE of a folder's notes stops first (`run`
checks every folder before any source changes anything) unless deletes are allowed. An inbox
note whose file was deleted from ingested/ is soft-deleted the same way by a full build
(--rebuild), the only run that lists ingested/.

Over ~300 lines on purpose: the run, the deletion pre-check and each source's sync share one
run's state (lock, store, cache, summary); split, they would only pass it around.

A private note (kb.ingest.prepare) is never embedded or stored: what the collection holds of it (a
note made private since, or whose `private` field is unclear) is deleted outright, not
soft-deleted, before anything is written; then the source's after-store hook runs for it (the
inbox moves it into ingested/, unindexed, so its earlier version there is replaced and no later
--rebuild can index that one again).

`stop` (an Event, set by ingest.py on Ctrl-C) ends the run after the current group.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial

from kb.app.backend import embed_client
from kb.content.formats import CODE, PROSE
from kb.content.notes import normalise_tags
from kb.core.errors import EmbedError, IngestError, ModelMismatch, StoreError
from kb.core.schema import FILE_DELETED, INBOX, PLAYLIST_REMOVED, VIEW_COUNT
from kb.core.settings import Settings
from kb.core.state import State
from kb.embedding.cache import EmbedCache
from kb.embedding.client import EmbedClient
from kb.embedding.keywords import document_vector
from kb.ingest import plan as sync
from kb.ingest import switch
from kb.ingest.prepare import Prepared, Read, prepare
from kb.ingest.progress import Progress, Summary
from kb.sources.base import Failure, Source
from kb.sources.domain import DomainSource, Listed
from kb.sources.folder import FolderSource, configured
from kb.sources.inbox import InboxSource
from kb.sources.youtube.playlist import PlaylistSource
from kb.sources.youtube.playlist import close as close_youtube
from kb.sources.youtube.playlist import configured as youtube_playlists
from kb.store import collection
from kb.store.points import Point, Store

log = logging.getLogger(__name__)


def _groups(pending: Sequence[Prepared], target_chunks: int) -> Iterator[list[Prepared]]:
    """Consecutive notes holding up to `target_chunks` chunks together (a bigger note alone).

    With the embed batch size as target, a group is one full request to the embedder rather
    than a full one plus a tiny remainder.
    """
    group: list[Prepared] = []
    size = 0
    for item in pending:
        if group and size + len(item.chunks) > target_chunks:
            yield group
            group, size = [], 0
        group.append(item)
        size += len(item.chunks)
    if group:
        yield group


@dataclass
class _Writer:
    """Embeds, stores and hands over groups of notes for one run."""

    source: Source
    client: EmbedClient
    cache: EmbedCache
    store: Store
    model: str
    dimensions: int
    wanted: dict[str, dict[str, str]]  # the notes' points and fingerprints (kb.ingest.plan)
    stored: dict[str, dict[str, str]]  # what the collection held for them before this run
    date_ingested: str  # one UTC timestamp for the whole run
    summary: Summary
    progress: Progress

    def write(self, group: list[Prepared]) -> None:
        texts = [text for p in group for text in p.texts]
        vectors = self.cache.embed_documents(self.client, texts)
        if len(vectors) != len(texts) or any(len(v) != self.dimensions for v in vectors):
            raise IngestError(f"embedder returned malformed vectors for {len(texts)} texts")
        points: list[Point] = []
        for p in group:
            points_of = self.wanted[p.note.source]
            for record, (pid, note_hash) in zip(p.records, points_of.items(), strict=True):
                record = replace(record, date_ingested=self.date_ingested, note_hash=note_hash)
                points.append(
                    Point(
                        id=pid,
                        vector=vectors[len(points)],
                        payload=record.payload(),
                        # keywords of the very text embedded: a deep chunk is found by its
                        # note's title and section words too
                        keyword=document_vector(texts[len(points)]),
                    )
                )
        # only notes with stored points can have stale ones: embedded Qdrant scans every point
        # to delete by filter, so skipping that for new notes keeps a first ingest linear
        stale = [p.note.source for p in group if p.note.source in self.stored]
        self.store.replace(points, stale)
        self.summary.written += len(points)
        self.progress.stored([p.note.source for p in group])
        self.hand_over(group, written=True)

    def hand_over(self, group: list[Prepared], *, written: bool, restored: bool = False) -> None:
        """The source's after-store hook, then each note counted once."""
        errors = self.source.after_store([p.item for p in group])
        for p, error in zip(group, errors, strict=True):
            name = p.note.source
            if error is not None:
                # stored, but not handed over (the inbox: not moved): the next run redoes it
                failure = Failure(p.item.shown, f"stored, but not moved: {error}")
                self.summary.failed.append(failure)
                self.progress.failed(failure)
                continue
            if restored:
                self.summary.restored.append(name)
            elif not written:
                self.summary.unchanged.append(name)
            elif name in self.stored or p.item.replaces:
                self.summary.replaced.append(name)
            else:
                self.summary.added.append(name)
            self.summary.chunks += len(p.chunks)
            self.progress.done(name, len(p.chunks))


def _embedder_model(client: EmbedClient, wait_s: float) -> tuple[str, int]:
    """The embedder's model and dimension, waiting up to `wait_s` while it loads the model."""
    try:
        client.health()
    except EmbedError as exc:
        if exc.status != 503:
            raise
        log.info("the embedder is still loading its model; waiting up to %.0fs", wait_s)
        client.wait_ready(timeout=wait_s)
    return client.model, client.dimensions


def ingest(
    source: Source,
    client: EmbedClient,
    store: Store,
    state: State,
    *,
    rebuild: bool = False,
    max_bytes: int = 5_000_000,
    group_chunks: int = 16,
    cache: bool = True,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
    max_delete: float = 0.5,
    allow_deletes: bool = False,
    private_tags: Collection[str] = (),
) -> Summary:
    """Ingest what `source` holds (everything it ever held, with rebuild).

    A complete source (a folder) is synced: notes whose files are gone are soft-deleted, unless
    that is more than `max_delete` of its notes and not `allow_deletes` (IngestError first).

    Returns the Summary; items that could not be ingested are in `summary.failed` and were left
    untouched. Raises IngestError (its `.summary` says what was finished) when the run stops:
    bad frontmatter in the inbox, another ingest running, `stop` set, the embedder or Qdrant
    failing.
    """
    progress = progress or Progress()
    summary = Summary(rebuilt=rebuild)
    started = time.monotonic()
    date_ingested = datetime.now(UTC).isoformat(timespec="seconds")
    with state.lock():
        try:
            _run(source, client, store, state, summary, progress, rebuild=rebuild,
                 max_bytes=max_bytes, group_chunks=group_chunks, cache=cache, stop=stop,
                 date_ingested=date_ingested, max_delete=max_delete,
                 allow_deletes=allow_deletes, private_tags=private_tags)  # fmt: skip
        except IngestError as exc:
            exc.summary = summary
            raise
        except EmbedError as exc:
            raise IngestError(exc.message, summary) from exc
        except StoreError as exc:
            raise IngestError(str(exc), summary) from exc
        finally:
            source.finish()
            summary.seconds = time.monotonic() - started
            progress.finish(summary)
            state.log_run(_run_record(summary, date_ingested, source, store.collection))
    log.debug("ingest finished: %d notes, %d chunks", len(summary.ingested), summary.chunks)
    return summary


def _run(
    source: Source,
    client: EmbedClient,
    store: Store,
    state: State,
    summary: Summary,
    progress: Progress,
    *,
    rebuild: bool,
    max_bytes: int,
    group_chunks: int,
    cache: bool,
    stop: threading.Event | None,
    date_ingested: str,
    max_delete: float,
    allow_deletes: bool,
    private_tags: Collection[str],
) -> None:
    build = collection.start_build(store, rebuild=rebuild)
    full = build.full or source.complete  # the listing names everything the source holds
    read = prepare(source, full, max_bytes, summary, progress, private_tags)
    prepared = read.notes
    if read.unindexed and build.existing is not None:
        unindex(source, store, read, summary, progress)
    elif read.private:
        hand_over_private(source, read, summary, progress)
    if not prepared and not full:
        return
    model, dimensions = _embedder_model(client, client.timeout)
    refilling = any(not p.item.pending for p in prepared)
    created = collection.ready_for_writes(store, build, model, dimensions, refilling=refilling)
    wanted = {p.note.source: p.points(model, dimensions) for p in prepared}
    stored: dict[str, dict[str, str]] = {}
    if not created:
        # a full listing is compared with this source's stored notes only, never another's
        stored = store.fingerprints(origin=source.origin) if full else store.fingerprints(wanted)
    plan = sync.plan(wanted, stored, full=full, holds=source.holds)
    if plan.gone:  # a folder's, or (a full build) the inbox's files deleted from ingested/
        if source.complete and not allow_deletes:
            check_deletes(source, len(plan.gone), stored, max_delete)
        log.info("%s: soft-deleting %d notes whose items are gone", source.origin, len(plan.gone))
        cause = PLAYLIST_REMOVED if isinstance(source, PlaylistSource) else FILE_DELETED
        store.soft_delete(plan.gone, cause, date_ingested)
        summary.deleted = plan.gone
    if isinstance(source, PlaylistSource) and source.refreshed:  # view counts read again
        store.set_fields({name: {VIEW_COUNT: n} for name, n in source.refreshed.items()
                          if name in stored and name not in plan.write})  # fmt: skip
    settled = [name for name in plan.settle if name not in plan.write]
    if settled:  # restored by hand and their files are back: a later file deletion counts
        store.restore(settled)
    by_name = {p.note.source: p for p in prepared}
    writing = [by_name[name] for name in plan.write]
    progress.start(len(prepared), sum(len(p.chunks) for p in prepared))
    # an older version kept the cache inside the inbox; nothing is ever looked for in a folder
    old_cache_in = source.root if source.origin == INBOX else None
    with EmbedCache(state.embed_cache_path(old_cache_in) if cache else None) as vectors:
        writer = _Writer(source, client, vectors, store, model, dimensions, wanted, stored,
                         date_ingested, summary, progress)  # fmt: skip
        try:
            writer.hand_over([by_name[name] for name in plan.unchanged], written=False)
            if plan.restore:
                store.restore(plan.restore)  # its points are the note as it is: made visible
                writer.hand_over([by_name[n] for n in plan.restore], written=False, restored=True)
            done = 0
            for group in _groups(writing, group_chunks):
                if stop is not None and stop.is_set():
                    left = len(writing) - done
                    raise IngestError(f"interrupted; {left} notes are left for the next run")
                writer.write(group)
                done += len(group)
        finally:
            summary.embedded_cached = vectors.hits
    collection.finish_build(store, build)


def unindex(source: Source, store: Store, read: Read, summary: Summary, progress: Progress) -> None:
    """Delete what the collection holds of private notes (and of notes whose `private` field is
    unclear), then hand the private ones over to the source. Hard delete: a private note must
    not stay in the index, not even hidden."""
    stored = sorted(store.fingerprints(read.unindexed))
    if stored:
        log.info("%s: taking %d private notes out of the index", source.origin, len(stored))
        store.delete_sources(stored)
        summary.unindexed.extend(stored)
    hand_over_private(source, read, summary, progress)


def hand_over_private(source: Source, read: Read, summary: Summary, progress: Progress) -> None:
    """The source's after-store hook for private notes (the inbox moves them into ingested/,
    unindexed); each counted once, as private or (not moved) failed."""
    errors = source.after_store(read.private)
    for item, error in zip(read.private, errors, strict=True):
        if error is None:
            summary.private.append(item.source)
        else:
            failure = Failure(item.shown, f"private (not indexed), but not moved: {error}")
            summary.failed.append(failure)
            progress.failed(failure)


def check_deletes(
    source: Source, gone: int, stored: dict[str, dict[str, str]], share: float
) -> None:
    """IngestError when soft-deleting `gone` notes of a folder whose `stored` notes (some maybe
    soft-deleted already) is more than `share` of them (and more than one): an unmounted drive,
    a wrong branch checked out. Nothing has changed yet."""
    live = sum(1 for points in stored.values() if not sync.deleted(points))
    if gone > max(1.0, share * live):
        where = (
            f"YOUTUBE_PLAYLISTS {source.origin}: {gone} of its {live} videos are gone from the "
            "playlist"
            if isinstance(source, PlaylistSource)
            else f"NOTE_FOLDERS {source.origin} ({source.root}): {gone} of its {live} notes are "
            "gone from the folder"
        )
        raise IngestError(
            f"{where}, more than NOTE_FOLDERS_MAX_DELETE={share:g}; nothing was changed. "
            "If the folder is right (not an unmounted drive), confirm with "
            "`uv run ingest.py --allow-deletes`"
        )


def _run_record(
    summary: Summary, date_ingested: str, source: Source, collection_name: str
) -> dict[str, object]:
    """The run log's line: counts, and the names of failed notes with the reason (never their
    text). A source is synced once per collection (its notes, its code): one line each."""
    return {
        "started": date_ingested,
        "source": str(source.root),
        "collection": collection_name,
        "seconds": round(summary.seconds, 3),
        "rebuild": summary.rebuilt,
        "added": len(summary.added),
        "replaced": len(summary.replaced),
        "unchanged": len(summary.unchanged),
        "restored": len(summary.restored),
        "removed": len(summary.removed),
        "deleted": len(summary.deleted),
        "private": len(summary.private),
        "unindexed": len(summary.unindexed),
        "skipped": summary.skipped,
        "chunks": summary.chunks,
        "embedded_cached": summary.embedded_cached,
        "failed": [{"source": f.source, "reason": f.reason} for f in summary.failed],
    }


def run(
    settings: Settings,
    client: EmbedClient,
    store: Store,
    *,
    rebuild: bool | str = False,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
    allow_deletes: bool = False,
    youtube_only: bool = False,
    only: Collection[str] | None = None,
) -> Summary:
    """Ingest the inbox NOTES_DIR (and, with rebuild, everything in ingested/), then sync every
    NOTE_FOLDERS folder, then every YOUTUBE_PLAYLISTS playlist (only those with `youtube_only`),
    as the settings say: what ingest.py runs. Prose goes to `store` (COLLECTION), code and
    notebooks to CODE_COLLECTION beside it, embedded with CODE_EMBED_MODEL (kb.sources.domain);
    `rebuild` True rebuilds both, a collection's name that one only. ConfigError for a bad
    NOTE_FOLDERS or YOUTUBE_PLAYLISTS and IngestError for a folder losing too many notes, before
    anything changes. `only`: the origins to sync ("inbox", folder names; no playlist), all when
    None (kb.app.watch)."""
    if not settings.NOTES_DIR.is_dir():
        raise IngestError(f"NOTES_DIR {settings.NOTES_DIR} is not a folder")
    folders = configured(settings)
    inbox = InboxSource(
        settings.NOTES_DIR, reserved=[f.name for f in folders], suffixes=settings.index_extensions
    )
    files: list[Source] = [] if youtube_only else [inbox, *folders]
    if only is not None:
        files = [s for s in files if s.origin in only]
    chosen = [f for f in folders if f in files]
    if not allow_deletes:
        _check_folders(chosen, store, settings.NOTE_FOLDERS_MAX_DELETE)
    # a watcher's batch (`only`) never spends YouTube quota
    playlists = youtube_playlists(settings, State(settings.STATE_DIR)) if only is None else []
    total = Summary(rebuilt=bool(rebuild))
    step = partial(_ingest_into, total, settings, progress=progress, stop=stop,
                   allow_deletes=allow_deletes)  # fmt: skip
    live = store
    try:
        code_live = store.beside(settings.CODE_COLLECTION)
        with embed_client(settings, code=True) as code_client:
            # a new model or chunker: written beside the searched collection (kb.ingest.switch)
            store, code_store = switch.begin(live, client), switch.begin(code_live, code_client)
            for source in files:
                listed = Listed(source)
                for view, target, embedder in (
                    (DomainSource(listed, PROSE), store, client),
                    (DomainSource(listed, CODE), code_store, code_client),
                ):
                    if view.domain == CODE and not _has_code(view, code_store, bool(rebuild)):
                        continue  # no code anywhere: no code collection, no code model needed
                    step(
                        view,
                        embedder,
                        target,
                        rebuild=_rebuilds(rebuild, code_live if target is code_store else live),
                    )
            for playlist in playlists:  # videos are prose: the notes collection
                step(playlist, client, store, rebuild=_rebuilds(rebuild, live))
            if only is None and not youtube_only:  # every source synced: the rebuild is whole
                switch.finish(live, store)
                switch.finish(code_live, code_store)
    finally:
        close_youtube(playlists)
    return total


def _rebuilds(rebuild: bool | str, store: Store) -> bool:
    """--rebuild (True) rebuilds every collection; --rebuild NAME that one only."""
    return rebuild is True or rebuild == store.collection


def _ingest_into(
    total: Summary,
    settings: Settings,
    source: Source,
    client: EmbedClient,
    store: Store,
    *,
    rebuild: bool,
    progress: Progress | None,
    stop: threading.Event | None,
    allow_deletes: bool,
) -> None:
    """One source (or one domain's view of it) into one collection, counted in `total`."""
    try:
        total.add(
            ingest(
                source,
                client,
                store,
                State(settings.STATE_DIR),
                rebuild=rebuild,
                max_bytes=settings.NOTE_MAX_BYTES,
                group_chunks=settings.EMBED_BATCH_SIZE,
                cache=settings.EMBED_CACHE,
                progress=progress,
                stop=stop,
                max_delete=settings.NOTE_FOLDERS_MAX_DELETE,
                allow_deletes=allow_deletes,
                private_tags=normalise_tags(settings.PRIVATE_TAGS),
            )
        )
    except IngestError as exc:
        if exc.summary is not None:
            total.add(exc.summary)
        exc.summary = total
        raise
    return total


def _has_code(view: DomainSource, code_store: Store, rebuild: bool) -> bool:
    """Whether the code pass has anything to do: code items listed, or a code collection that
    may hold this source's code from before (then its sync must see the files gone)."""
    listed = view.has_items(everything=view.complete or rebuild)
    return listed or collection.info(code_store) is not None


def _check_folders(folders: Sequence[FolderSource], store: Store, share: float) -> None:
    """The mass-deletion guard for every folder, before any source changes anything (each
    folder's own sync checks again against what it read)."""
    try:
        if not folders or collection.info(store) is None:
            return
    except ModelMismatch:
        return  # not our collection: the run says so (or --rebuild re-creates it)
    for folder in folders:
        listed = {item.source for item in folder.listing(everything=True).items}
        stored = store.fingerprints(origin=folder.origin)
        gone = [
            name for name, points in stored.items()
            if name not in listed and not sync.deleted(points) and not sync.kept(points)
            and not folder.holds(name)
        ]  # fmt: skip
        if gone:
            check_deletes(folder, len(gone), stored, share)
