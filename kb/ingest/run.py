"""Ingest: a source's notes -> chunks -> embedder -> Qdrant, then the source's after-store hook.

A run (1) takes the ingest lock, (2) reads and chunks every listed note first, so bad
frontmatter in the inbox stops the run before anything is written (a folder's note fails alone,
kb.ingest.prepare) and progress knows the total, (3) plans with kb.ingest.plan which notes
changed, (4) stores those by their words first (keyword vectors alone, payload EMBEDDING =
PENDING: keyword search finds them within seconds), deleting the notes' stale chunks, then embeds
them in groups, most recently modified first (vectors by content hash from kb.embedding.cache),
writing each group's points whole with wait=True, and (5) only then calls the source's
`after_store` for the group (the inbox moves the files into ingested/). A run killed at any point
leaves every note either still to do (its points PENDING or old: re-ingested next run,
overwriting its points: ids are deterministic) or stored and done.

A complete source (a NOTE_FOLDERS folder, a playlist) is synced in full each run: only its own
stored notes (payload `origin`) are compared with its listing; a note whose item is gone is
soft-deleted (hidden, kept, with the source's `deletion_cause`), one whose item comes back
unchanged is restored without embedding. A sync that would soft-delete more than
NOTE_FOLDERS_MAX_DELETE of a source's notes stops first (kb.ingest.guard: `run` checks every
folder before any source changes anything) unless deletes are allowed. An inbox note
whose file was deleted from ingested/ is soft-deleted the same way by a full build (--rebuild),
the only run that lists ingested/.

No kind of source is known here: what differs between them is asked of the source
(kb.sources.base.Source: its collections, deletion cause, refreshed fields, guard wording).
kb.app.ingest builds the sources, the clients and the config from the settings.

A private note (kb.ingest.prepare) is never embedded or stored: what the collection holds of it (a
note made private since, or whose `private` field is unclear) is deleted outright, not
soft-deleted, before anything is written; then the source's after-store hook runs for it (the
inbox moves it into ingested/, unindexed, so its earlier version there is replaced and no later
--rebuild can index that one again).

`options.stop` (an Event, set by ingest.py on Ctrl-C) ends the run after the current group.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from kb.content.formats import CODE
from kb.core.errors import EmbedError, IngestError, StoreError
from kb.core.schema import EMBEDDING, PENDING, PENDING_MARK
from kb.core.state import State
from kb.embedding.cache import EmbedCache
from kb.embedding.client import EmbedClient
from kb.embedding.keywords import document_vector
from kb.embedding.languages import ENGLISH
from kb.ingest import plan as sync
from kb.ingest.guard import check_deletes, check_sources
from kb.ingest.options import DEFAULTS, IngestConfig, IngestOptions
from kb.ingest.prepare import Prepared, Read, prepare
from kb.ingest.progress import Progress, Summary
from kb.sources.base import Failure, Source
from kb.sources.domain import DomainSource, Listed
from kb.store import collection
from kb.store.points import Point, Store

log = logging.getLogger(__name__)
WORDS_GROUP = 512  # chunks per group stored by their words alone: no embedder to wait for


def _groups(pending: Iterable[Prepared], target_chunks: int) -> Iterator[list[Prepared]]:
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

    def words(self, group: list[Prepared]) -> list[Prepared]:
        """Store the group's points by their words: each note whole when the embedding cache
        holds all its vectors (handed over at once), else with keyword vectors alone, marked
        PENDING, found by keyword search from now on. The notes still to embed, in order."""
        points: list[Point] = []
        whole: list[Prepared] = []
        waiting: list[Prepared] = []
        for p in group:
            vectors = self.cache.known(self.client, p.texts)
            (waiting if vectors is None else whole).append(p)
            points += self._points(p, vectors)
            p.forget()  # until its meaning is written: not every waiting note's texts at once
        # only notes with stored points can have stale ones: embedded Qdrant scans every point
        # to delete by filter, so skipping that for new notes keeps a first ingest linear
        stale = [p.note.source for p in group if p.note.source in self.stored]
        self.store.replace(points, stale)
        self.progress.findable(len(waiting), sum(len(p.chunks) for p in waiting))
        if whole:
            self._stored(whole)
        else:
            self.progress.settled()
        return waiting

    def meaning(self, group: list[Prepared]) -> None:
        """Embed the group's notes and write their points whole (dense vector and all) over
        the keyword-only ones `words` stored, then hand them over."""
        texts = [text for p in group for text in p.texts]
        vectors = self.cache.embed_documents(self.client, texts)
        if len(vectors) != len(texts) or any(len(v) != self.dimensions for v in vectors):
            raise IngestError(f"embedder returned malformed vectors for {len(texts)} texts")
        points: list[Point] = []
        for p in group:
            points += self._points(p, vectors[len(points) : len(points) + len(p.chunks)])
            p.forget()
        self.store.replace(points, [])
        self._stored(group)

    def _points(self, p: Prepared, vectors: Sequence[list[float]] | None) -> list[Point]:
        """The note's points: whole with `vectors`, else by their words alone (PENDING)."""
        points: list[Point] = []
        pending = {EMBEDDING: PENDING} if vectors is None else {}
        points_of = self.wanted[p.note.source]
        for i, (record, (pid, note_hash)) in enumerate(
            zip(p.records, points_of.items(), strict=True)
        ):
            record = replace(record, date_ingested=self.date_ingested, note_hash=note_hash)
            points.append(
                Point(
                    id=pid,
                    vector=None if vectors is None else vectors[i],
                    payload=record.payload() | pending,
                    # keywords of the very text embedded: a deep chunk is found by its
                    # note's title and section words too
                    keyword=document_vector(p.texts[i], record.language or ENGLISH),
                )
            )
        return points

    def _stored(self, group: list[Prepared]) -> None:
        """These notes' points are stored whole: count them, then the source's hand-over."""
        self.summary.written += sum(len(p.chunks) for p in group)  # whole points only
        self.progress.stored([p.note.source for p in group])
        self.hand_over(group, written=True)
        self.progress.settled()

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
            elif p.item.replaces or (name in self.stored and not _words_only(self.stored[name])):
                self.summary.replaced.append(name)
            else:
                self.summary.added.append(name)
            self.summary.chunks += len(p.chunks)
            self.progress.done(name, len(p.chunks))


def _words_only(fingerprints: dict[str, str]) -> bool:
    """Whether a stored note was only ever stored by its words (a run stopped before its
    meaning): embedding it now adds it, it replaces nothing the user could search by meaning."""
    return all(PENDING_MARK in f for f in fingerprints.values())


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


@dataclass(frozen=True)
class Target:
    """One collection a run writes: its store, and the embedder client of its model."""

    store: Store
    client: EmbedClient


@dataclass(frozen=True)
class _Job:
    """One source's sync into one collection: what `_run` reads."""

    source: Source
    client: EmbedClient
    store: Store
    state: State
    config: IngestConfig
    options: IngestOptions
    summary: Summary
    progress: Progress
    date_ingested: str  # one UTC timestamp for the whole run


def ingest(
    source: Source,
    client: EmbedClient,
    store: Store,
    state: State,
    config: IngestConfig,
    options: IngestOptions = DEFAULTS,
) -> Summary:
    """Ingest what `source` holds into `store`'s collection (everything it ever held, when
    `options` rebuild that collection).

    A complete source (a folder) is synced: notes whose items are gone are soft-deleted, unless
    that is more than `config.max_delete` of its notes and not `options.allow_deletes`
    (IngestError first).

    Returns the Summary; items that could not be ingested are in `summary.failed` and were left
    untouched. Raises IngestError (its `.summary` says what was finished) when the run stops:
    bad frontmatter in the inbox, another ingest running, `options.stop` set, the embedder or
    Qdrant failing.
    """
    progress = options.progress or Progress()
    summary = Summary(rebuilt=options.rebuilds(store.collection))
    started = time.monotonic()
    date_ingested = datetime.now(UTC).isoformat(timespec="seconds")
    job = _Job(source, client, store, state, config, options, summary, progress, date_ingested)
    with state.lock():
        try:
            _run(job)
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


def _run(job: _Job) -> None:
    source, client, store = job.source, job.client, job.store
    summary, progress, config = job.summary, job.progress, job.config
    build = collection.start_build(store, rebuild=summary.rebuilt)
    full = build.full or source.complete  # the listing names everything the source holds
    # an incomplete listing (the inbox): its links may name notes stored from it before
    known = store.note_aliases(source.origin) if not full else None
    read = prepare(source, full, config.max_bytes, summary, progress, config.private_tags, known)
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
    wanted: dict[str, dict[str, str]] = {}
    for p in prepared:
        wanted[p.note.source] = p.points(model, dimensions)
        p.forget()  # made again for its group: never every note's texts and records at once
    stored: dict[str, dict[str, str]] = {}
    if not created:
        # a full listing is compared with this source's stored notes only, never another's
        stored = store.fingerprints(origin=source.origin) if full else store.fingerprints(wanted)
    plan = sync.plan(wanted, stored, full=full, holds=source.holds)
    if plan.gone:  # a folder's, or (a full build) the inbox's files deleted from ingested/
        if source.complete and not job.options.allow_deletes:
            check_deletes(source, len(plan.gone), stored, config.max_delete)
        log.info("%s: soft-deleting %d notes whose items are gone", source.origin, len(plan.gone))
        store.soft_delete(plan.gone, source.deletion_cause, job.date_ingested)
        summary.deleted = plan.gone
    refreshed = {name: fields for name, fields in source.refreshed_fields().items()
                 if name in stored and name not in plan.write}  # fmt: skip
    if refreshed:  # read again by the listing (a video's view count): nothing re-embedded
        store.set_fields(refreshed)
    settled = [name for name in plan.settle if name not in plan.write]
    if settled:  # restored by hand and their files are back: a later file deletion counts
        store.restore(settled)
    by_name = {p.note.source: p for p in prepared}
    writing = [by_name[name] for name in plan.write]
    unchanged = [by_name[name] for name in plan.unchanged]
    restored = [by_name[name] for name in plan.restore]
    progress.start(len(prepared), sum(len(p.chunks) for p in prepared))
    del by_name
    prepared.clear()  # (read.notes) each note is held by `writing` until it is written, no longer
    cache_path = job.state.embed_cache_path(config.old_cache_dir) if config.cache else None
    with EmbedCache(cache_path) as vectors:
        writer = _Writer(source, client, vectors, store, model, dimensions, wanted, stored,
                         job.date_ingested, summary, progress)  # fmt: skip
        try:
            writer.hand_over(unchanged, written=False)
            if plan.restore:
                store.restore(plan.restore)  # its points are the note as it is: made visible
                writer.hand_over(restored, written=False, restored=True)
            _write(writer, writing, config.group_chunks, job.options)
        finally:
            summary.embedded_cached = vectors.hits
    collection.finish_build(store, build)


def _write(
    writer: _Writer, writing: list[Prepared], group_chunks: int, options: IngestOptions
) -> None:
    """Words first, meaning next: store every note by its words (keyword search finds it
    within seconds), then embed them group by group, the most recently modified first (what
    a user is most likely to look for). `options.stop` ends it between groups: what is left
    keeps its keyword-only points, marked PENDING, which the next run plans as to write (kb.store
    .points.fingerprints); the embedding cache keeps what was embedded."""
    waiting: list[Prepared] = []
    left = len(writing)
    for group in _groups(_drain(writing), max(group_chunks, WORDS_GROUP)):
        _check_stop(options, left + len(waiting))  # the rest, and those waiting
        waiting += writer.words(group)
        left -= len(group)
    waiting.sort(key=_modified, reverse=True)  # stable: listing order among equals
    writer.progress.embedding(len(waiting), sum(len(p.chunks) for p in waiting))
    left = len(waiting)
    for group in _groups(_drain(waiting), group_chunks):
        _check_stop(options, left)
        writer.meaning(group)
        left -= len(group)


def _drain(notes: list[Prepared]) -> Iterator[Prepared]:
    """Each note in order, taken out of `notes` as it goes: a written note is not held until
    the run ends (what ingest holds shrinks as embedding goes on)."""
    notes.reverse()
    while notes:
        yield notes.pop()


def _check_stop(options: IngestOptions, left: int) -> None:
    if options.stop is not None and options.stop.is_set():
        raise IngestError(f"interrupted; {left} notes are left for the next run")


def _modified(p: Prepared) -> int:
    """When the note's file was last modified (0 for an item without a file)."""
    return p.stat.mtime_ns if p.stat is not None else 0


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
    sources: Sequence[Source],
    prose: Target,
    code: Target,
    state: State,
    config: IngestConfig,
    options: IngestOptions = DEFAULTS,
) -> Summary:
    """Ingest every source, in order, into the collections of its `domains`: prose into
    `prose`, code and notebooks into `code` (kb.sources.domain), once the mass-deletion guard
    (kb.ingest.guard) found no folder losing too many notes (unless `options.allow_deletes`).
    `options.rebuild` True rebuilds both collections, a collection's name that one only.
    The Summary counts every source; an IngestError's `.summary` what was done before it."""
    listed = [Listed(source) for source in sources]  # one listing per source, shared
    if not options.allow_deletes:
        check_sources(listed, prose.store, config.max_delete)
    total = Summary(rebuilt=bool(options.rebuild))
    for each in listed:
        for domain in each.source.domains:
            view = DomainSource(each, domain)
            target = code if domain == CODE else prose
            if domain == CODE and not _has_code(view, code.store, bool(options.rebuild)):
                continue  # no code anywhere: no code collection, no code model needed
            try:
                total.add(ingest(view, target.client, target.store, state, config, options))
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
