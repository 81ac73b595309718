"""The ingest pipeline: notes in NOTES_DIR -> chunks -> embedder -> Qdrant -> NOTES_DIR/ingested.

A run (1) takes the ingest lock, (2) reads and chunks every note first, so bad frontmatter stops
the run before anything is written and progress knows the total, (3) embeds notes in groups,
(4) writes each group's points with wait=True and deletes the notes' stale chunks, and (5) only
then moves the group's files into ingested/ by hard link + unlink (or rename), with fsyncs
(kb.inbox.move_all).
A run killed at any point leaves every note either still in the inbox (re-ingested next run,
overwriting its points: ids are deterministic) or stored and moved.

Every point carries its note's fingerprint (`note_hash`: model, dimension and everything written
for the note except the ingest date). A note whose stored points carry the fingerprint it would
get now is left as it is: a re-dropped unchanged note is only moved, and `--rebuild` of a
collection made for the same model and layout updates it in place, writing only notes that
changed and deleting notes whose files are gone. Embedding is skipped per chunk by kb.embed_cache.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from embed_client import EmbedClient, EmbedError
from kb.chunking import Chunk, chunk_note, embedding_text, note_title
from kb.embed_cache import CACHE_NAME, EmbedCache
from kb.inbox import INGESTED, discover, move_all
from kb.notes import FrontmatterError, Note, NoteError, read_note
from kb.progress import Failure, Progress, Summary
from kb.qdrant_query import folders_of
from kb.settings import Settings
from kb.sparse import TOKENIZER_VERSION, document_vector
from kb.store import SCHEMA_VERSION, ModelMismatch, Point, Store, StoreError, point_id

log = logging.getLogger(__name__)

LOCK_NAME = ".ingest.lock"


class IngestError(Exception):
    """The run stopped. `summary` says what it had finished (those notes are stored and moved)."""

    def __init__(self, message: str, summary: Summary | None = None) -> None:
        super().__init__(message)
        self.summary = summary or Summary()


class IngestBusy(IngestError):
    """Another ingest holds the lock."""


@dataclass
class Pending:
    note: Note
    chunks: list[Chunk]
    inbox: bool  # in the inbox (moved once stored) rather than ingested/ (rebuild: stays put)
    replaces: bool  # an earlier version of this note is in ingested/
    title: str = ""  # the note's title (chunking.note_title)

    @cached_property
    def texts(self) -> list[str]:
        """What is embedded for each chunk: the chunk with its title, heading path and topic."""
        return [embedding_text(c, self.note, self.title) for c in self.chunks]

    def fingerprint(self, model: str, dimensions: int) -> str:
        """Hash of everything this note's points would hold except the ingest date: equal
        fingerprints mean rewriting the note would change nothing but that date."""
        written = [
            [point_id(self.note.source, c.index), text, _payload(self, c)]
            for c, text in zip(self.chunks, self.texts, strict=True)
        ]
        key = [model, dimensions, SCHEMA_VERSION, TOKENIZER_VERSION, written]
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


# --- locking --------------------------------------------------------------------------


_held: set[Path] = set()  # locks this process holds (the lock is re-entrant per process)


@contextmanager
def ingest_lock(notes_dir: Path) -> Iterator[None]:
    """Serialise writers: one ingest (or rebuild) per notes folder at a time.

    flock is released by the kernel when the holder exits, even on SIGKILL, so a crash never
    leaves a stale lock behind. ingest.py takes it before opening embedded storage, so a
    second ingest is told about the first rather than about a busy storage folder.
    """
    if not notes_dir.is_dir():
        raise IngestError(f"NOTES_DIR {notes_dir} is not a folder")
    path = (notes_dir / LOCK_NAME).resolve()
    if path in _held:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise IngestBusy(
                f"another ingest is running (pid {pid}); wait for it to finish"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held.add(path)
        try:
            yield
        finally:
            _held.discard(path)
    finally:
        os.close(fd)


# --- the run --------------------------------------------------------------------------


def _prepare(
    settings: Settings, rebuild: bool, summary: Summary, progress: Progress
) -> list[Pending]:
    """Read and chunk every note to ingest; stops the run on bad frontmatter."""
    inbox_dir = settings.NOTES_DIR
    ingested_dir = settings.ingested_dir
    inbox, failed, ignored = discover(inbox_dir, inbox_dir, skip_ingested=True)
    stored: list[tuple[Path, str]] = []
    if rebuild:
        stored, failed_stored, ignored_stored = discover(
            ingested_dir, inbox_dir, skip_ingested=False
        )
        failed += [Failure(f"{INGESTED}/{f.source}", f.reason) for f in failed_stored]
        ignored += [f"{INGESTED}/{name}" for name in ignored_stored]
        # a note both re-dropped and already ingested: only the new version is embedded
        in_inbox = {source for _, source in inbox}
        stored = [(path, source) for path, source in stored if source not in in_inbox]
    summary.ignored = ignored

    pending: list[Pending] = []
    bad_yaml: list[str] = []
    for (path, source), from_inbox in [(s, False) for s in stored] + [(s, True) for s in inbox]:
        shown = source if from_inbox else f"{INGESTED}/{source}"
        try:
            note = read_note(path, source, max_bytes=settings.NOTE_MAX_BYTES)
            chunks = chunk_note(note)
            if not chunks:
                raise NoteError(path, "no text to index")
        except FrontmatterError as exc:
            bad_yaml.append(f"{shown}: {exc.reason}")
            continue
        except NoteError as exc:
            failed.append(Failure(shown, exc.reason))
            continue
        except OSError as exc:
            failed.append(Failure(shown, f"cannot read it ({exc.strerror})"))
            continue
        dest = ingested_dir / source
        replaces = False
        if from_inbox and os.path.lexists(dest):
            if not dest.is_file() or dest.is_symlink():
                failed.append(
                    Failure(shown, f"{INGESTED}/{source} exists and is not a file; rename one")
                )
                continue
            replaces = not os.path.samefile(path, dest)
        pending.append(
            Pending(note, chunks, inbox=from_inbox, replaces=replaces, title=note_title(note))
        )

    for failure in failed:
        summary.failed.append(failure)
        progress.failed(failure)
    if bad_yaml:
        raise IngestError(
            "; ".join(bad_yaml) + "; nothing was ingested: fix the frontmatter and run again",
            summary,
        )
    return pending


def _payload(pending: Pending, chunk: Chunk) -> dict[str, Any]:
    """A chunk's payload, less `note_hash` and `date_ingested` (added when it is written)."""
    note = pending.note
    return {
        "text": chunk.text,
        "source": note.source,
        "folders": folders_of(note.source),
        "title": pending.title,
        "heading_path": list(chunk.heading_path),
        "chunk_index": chunk.index,
        "tags": list(note.tags),
        "topic": note.topic,
        "document_date": note.document_date,
        "char_start": chunk.char_start,
        "char_end": chunk.char_end,
        "line_start": chunk.line_start,
        "line_end": chunk.line_end,
    }


def _groups(pending: Sequence[Pending], target_chunks: int) -> Iterator[list[Pending]]:
    """Consecutive notes holding up to `target_chunks` chunks together (a bigger note alone).

    With the embed batch size as target, a group is one full request to the embedder rather
    than a full one plus a tiny remainder.
    """
    group: list[Pending] = []
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
    """Embeds, stores and moves groups of notes for one run."""

    settings: Settings
    client: EmbedClient
    cache: EmbedCache
    store: Store
    model: str
    dimensions: int
    date_ingested: str  # one UTC timestamp for the whole run
    stored: dict[str, dict[str, str]]  # fingerprints of the pending notes' stored points
    summary: Summary
    progress: Progress

    def write(self, group: list[Pending]) -> None:
        changed: list[tuple[Pending, str]] = []
        for p in group:
            note_hash = p.fingerprint(self.model, self.dimensions)
            expected = {point_id(p.note.source, c.index): note_hash for c in p.chunks}
            if self.stored.get(p.note.source) == expected:
                self.summary.unchanged += 1  # stored exactly so already: nothing to write
            else:
                changed.append((p, note_hash))
        if changed:
            self._store(changed)
        sources = [p.note.source for p in group]
        self.progress.stored(sources)
        self._move(group)

    def _store(self, changed: list[tuple[Pending, str]]) -> None:
        texts = [text for p, _ in changed for text in p.texts]
        vectors = self.cache.embed_documents(self.client, texts)
        if len(vectors) != len(texts) or any(len(v) != self.dimensions for v in vectors):
            raise IngestError(f"embedder returned malformed vectors for {len(texts)} texts")
        points: list[Point] = []
        for p, note_hash in changed:
            for chunk in p.chunks:
                payload = _payload(p, chunk)
                payload["date_ingested"] = self.date_ingested
                payload["note_hash"] = note_hash
                points.append(
                    Point(
                        id=point_id(p.note.source, chunk.index),
                        vector=vectors[len(points)],
                        payload=payload,
                        # keywords of the very text embedded: a deep chunk is found by its
                        # note's title and section words too
                        keyword=document_vector(texts[len(points)]),
                    )
                )
        # only notes with stored points can have stale ones: embedded Qdrant scans every point
        # to delete by filter, so skipping that for new notes keeps a first ingest linear
        stale = [p.note.source for p, _ in changed if p.note.source in self.stored]
        self.store.replace(points, stale)

    def _move(self, group: list[Pending]) -> None:
        moving = [p for p in group if p.inbox]
        errors = move_all(
            [(p.note.path, self.settings.ingested_dir / p.note.source) for p in moving]
        )
        failed = {id(p): exc for p, exc in zip(moving, errors, strict=True) if exc is not None}
        for p in group:
            if id(p) in failed:
                # stored but not moved: still in the inbox, so the next run redoes it
                self._failed(Failure(p.note.source, f"stored, but not moved: {failed[id(p)]}"))
                continue
            self.summary.ingested.append(p.note.source)
            if p.replaces:
                self.summary.replaced.append(p.note.source)
            self.summary.chunks += len(p.chunks)
            self.progress.done(p.note.source, len(p.chunks))

    def _failed(self, failure: Failure) -> None:
        self.summary.failed.append(failure)
        self.progress.failed(failure)


def _delete_gone(
    store: Store, settings: Settings, stored: dict[str, dict[str, str]], pending: list[Pending]
) -> None:
    """A full build in place: remove the points of notes whose files are gone from ingested/
    (and the inbox). A note still there but unreadable keeps its points; its failure is
    reported."""
    kept = {p.note.source for p in pending}
    gone = [
        source
        for source in stored
        if source not in kept
        and not os.path.lexists(settings.ingested_dir / source)
        and not os.path.lexists(settings.NOTES_DIR / source)
    ]
    if gone:
        log.info("removing %d notes whose files are gone from %s", len(gone), INGESTED)
        store.delete_sources(gone)
        for source in gone:
            del stored[source]


def _embedder_model(client: EmbedClient, settings: Settings) -> tuple[str, int]:
    """The embedder's model and dimension, waiting (EMBED_TIMEOUT) while it loads the model."""
    try:
        client.health()
    except EmbedError as exc:
        if exc.status != 503:
            raise
        log.info(
            "the embedder is still loading its model; waiting up to %.0fs", settings.EMBED_TIMEOUT
        )
        client.wait_ready(timeout=settings.EMBED_TIMEOUT)
    return client.model, client.dimensions


def run(
    settings: Settings,
    client: EmbedClient,
    store: Store,
    *,
    rebuild: bool = False,
    progress: Progress | None = None,
) -> Summary:
    """Ingest the notes in settings.NOTES_DIR (and, with rebuild, everything in ingested/).

    Returns the Summary; files that could not be ingested are in `summary.failed` and were left
    untouched. Raises IngestError (its `.summary` says what was finished) when the run stops:
    bad frontmatter, another ingest running, the embedder or Qdrant failing.
    """
    progress = progress or Progress()
    summary = Summary(rebuilt=rebuild)
    notes_dir = settings.NOTES_DIR
    started = time.monotonic()
    date_ingested = datetime.now(UTC).isoformat(timespec="seconds")

    def stop(exc: Exception, message: str) -> IngestError:
        summary.seconds = time.monotonic() - started
        progress.finish(summary)
        stopped = exc if isinstance(exc, IngestError) else IngestError(message)
        stopped.summary = summary
        return stopped

    with ingest_lock(notes_dir):
        try:
            try:
                existing = store.collection_model()
            except ModelMismatch:
                if not rebuild:
                    raise
                existing = None  # made by another tool: a rebuild re-creates it
            # ingested/ is read too when rebuilding, when the collection is new (e.g. its
            # storage was deleted) and when an earlier full build was interrupted
            full = rebuild or existing is None or existing.rebuild_incomplete
            if full and not rebuild:
                log.info(
                    "collection %s is new or incomplete: indexing ingested/ too", store.collection
                )
            pending = _prepare(settings, full, summary, progress)
            if pending or full:
                model, dimensions = _embedder_model(client, settings)
                if rebuild and existing is not None and not existing.current(model, dimensions):
                    existing = None  # another model or layout: re-create it from scratch
                stored: dict[str, dict[str, str]] = {}
                if existing is None:
                    store.drop()
                    # flagged until done when it holds notes from ingested/: if this run dies,
                    # the next one must index them again (inbox notes are still in the inbox)
                    from_ingested = any(not p.inbox for p in pending)
                    store.create(model, dimensions, rebuilding=from_ingested)
                else:
                    store.check_model(model, dimensions)
                    store.require_keyword()  # refuses a collection made by an older version
                    store.create_indexes()  # after an interrupted create, or new index fields
                    if full:
                        if not existing.rebuild_incomplete:
                            store.mark_complete(False)
                        stored = store.fingerprints()
                        _delete_gone(store, settings, stored, pending)
                    else:
                        stored = store.fingerprints(p.note.source for p in pending)
                settings.ingested_dir.mkdir(exist_ok=True)
                progress.start(len(pending), sum(len(p.chunks) for p in pending))
                # vectors by content hash: unchanged text is never embedded twice (see module)
                cache_path = settings.NOTES_DIR / CACHE_NAME if settings.EMBED_CACHE else None
                cache = EmbedCache(cache_path)
                writer = _Writer(
                    settings=settings,
                    client=client,
                    cache=cache,
                    store=store,
                    model=model,
                    dimensions=dimensions,
                    date_ingested=date_ingested,
                    stored=stored,
                    summary=summary,
                    progress=progress,
                )
                try:
                    for group in _groups(pending, settings.EMBED_BATCH_SIZE):
                        writer.write(group)
                        summary.seconds = time.monotonic() - started
                finally:
                    summary.embedded_cached = cache.hits
                    cache.close()
                if full:
                    store.mark_complete()
        except EmbedError as exc:
            raise stop(exc, exc.message) from exc
        except StoreError as exc:
            raise stop(exc, str(exc)) from exc
        except IngestError as exc:
            raise stop(exc, str(exc)) from None
    summary.seconds = time.monotonic() - started
    progress.finish(summary)
    log.debug("ingest finished: %d notes, %d chunks", len(summary.ingested), summary.chunks)
    return summary
