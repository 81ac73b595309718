"""What the knowledge base holds and what waits, in one place: the MCP tool `status()` and the
dashboard's status page both show this.

Read-only and cheap: facet counts from the store, the run log and the watcher file from
STATE_DIR, and a walk of each source's folder (names and modification times, never contents).
Every configured source of every kind is a row (kb.sources.registry: each kind says what its
rows are, `Kind.shown`, and what waits in them, `Kind.waiting`): its origin, the setting that
configures it, the notes the index holds from it and what keeps it from being read. "What
waits" is, for the inbox, every note file still in it (ingesting moves them out); for a
NOTE_FOLDERS folder, the files new since its last sync or modified after it started, plus the
stored notes whose file is gone (its next sync soft-deletes them); not counted for the others
(a mailbox, a playlist). The links that name notes that are not indexed (a vault's health: a
note not written yet, renamed or deleted) are listed from the index (kb.search.related).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kb.core.errors import StoreError
from kb.core.schema import INBOX, ORIGIN
from kb.core.settings import Settings
from kb.core.state import RUN_LOG_NAME, State
from kb.ingest import lifecycle, switch
from kb.ingest import plan as sync
from kb.search.related import UnresolvedLink, unresolved_links
from kb.sources import registry
from kb.sources.kind import Kind, Shown
from kb.store import collection
from kb.store.points import Store

WATCHER_FILE = "watcher.json"  # written by `ingest.py --watch` while it runs, removed on exit
RUN_LOG_TAIL = 256 * 1024  # bytes of the run log read: its last runs are at the end


@dataclass(frozen=True)
class Failure:
    source: str
    reason: str


@dataclass(frozen=True)
class SourceStatus:
    name: str  # its notes' `origin`: "inbox", a NOTE_FOLDERS name, "mail", "youtube/<id>" ...
    path: str  # what it reads (a folder, mailboxes, a playlist's link), as this process sees it
    notes: int  # live notes stored from it (soft-deleted ones not counted)
    # files not ingested yet, or changed since its last sync; None: not counted (a mailbox) or
    # not seen (a folder not mounted)
    waiting: int | None
    gone: int  # stored notes whose file left the folder (soft-deleted by its next sync)
    last_sync: str | None  # when its last sync started (UTC, ISO)
    failed: list[Failure]  # files its last sync could not ingest, with the reason
    problem: str | None  # why it cannot be read from here (e.g. not mounted, a setting wrong)
    setting: str = ""  # the setting that configures it (NOTES_DIR, NOTE_FOLDERS, MAIL ...)


@dataclass(frozen=True)
class WatcherStatus:
    running: bool  # the watcher file exists and its process is alive
    pid: int | None = None
    started_at: str | None = None
    folders: list[str] = field(default_factory=list)
    last_batch_at: str | None = None
    last_batch_notes: int | None = None


@dataclass(frozen=True)
class SwitchStatus:
    """An index being rebuilt beside the searched one (kb.ingest.switch)."""

    collection: str  # being built
    model: str | None  # for this model
    from_model: str | None  # the searched one's
    notes: int  # embedded so far
    of: int  # in the searched one


@dataclass(frozen=True)
class Status:
    collection: str
    exists: bool  # the collection was created (something was ingested)
    points: int  # chunks stored, soft-deleted notes' included
    notes: int  # live notes
    model: str | None  # the embedding model that built the collection
    dimensions: int | None
    deleted: int  # soft-deleted notes (restorable)
    last_sync: str | None  # when the last sync of any source started (UTC, ISO)
    sources: list[SourceStatus]
    watcher: WatcherStatus
    unresolved_links: int = 0  # links naming notes that are not indexed
    unresolved: list[UnresolvedLink] = field(default_factory=list)  # the first of them
    problem: str | None = None  # why the store could not be read
    switch: SwitchStatus | None = None  # a new index being built beside the searched one
    # chunks found by their words only, their meaning not embedded yet (kb.ingest.run)
    unembedded: int = 0
    ingest: str | None = None  # the running ingest's progress line (kb.ingest.progress)


def status(settings: Settings, store: Store | None) -> Status:
    """The whole picture; a store that cannot be read (None, or StoreError) is reported in
    `problem` with the sources still listed."""
    runs = last_runs(settings.STATE_DIR)
    rows = registry.shown(settings)
    counts: dict[str, int] = {}
    problem = None
    info = None
    total = deleted = broken = unembedded = 0
    unresolved: list[UnresolvedLink] = []
    switching: SwitchStatus | None = None
    try:
        if store is None:
            raise StoreError("the store is not open")
        info = collection.info(store)
        if info is not None:
            total, per_origin = store.note_counts(ORIGIN)
            counts = dict(per_origin)
            # notes written before `origin` existed came from the inbox
            counts[INBOX] = counts.get(INBOX, 0) + total - sum(counts.values())
            deleted = len(lifecycle.list_deleted(store))
            broken, unresolved = unresolved_links(store)
            unembedded = store.unembedded()
            under_way = switch.progress(store)
            if under_way is not None:
                switching = SwitchStatus(**asdict(under_way))
    except StoreError as exc:
        problem = str(exc)

    def live(origin: str) -> Callable[[], set[str]]:
        """The stored notes of `origin` not soft-deleted (read only by a kind that needs them)."""

        def read() -> set[str]:
            if store is None or info is None:
                return set()
            try:
                stored = store.fingerprints(origin=origin)
            except StoreError:
                return set()
            return {s for s, points in stored.items() if not sync.deleted(points)}

        return read

    logged = Counter(row.logged for _, row in rows)
    sources = [
        _source(kind, row, counts.get(row.origin, 0), runs.get(row.logged), live(row.origin),
                logged[row.logged] > 1, settings)
        for kind, row in rows
    ]  # fmt: skip
    started = [s.last_sync for s in sources if s.last_sync]
    return Status(
        collection=settings.COLLECTION,
        exists=info is not None,
        points=info.points if info else 0,
        notes=total,
        model=info.model if info else None,
        dimensions=info.dimensions if info else None,
        deleted=deleted,
        last_sync=max(started) if started else None,
        sources=sources,
        watcher=watcher(settings.STATE_DIR),
        unresolved_links=broken,
        unresolved=unresolved,
        problem=problem,
        switch=switching,
        unembedded=unembedded,
        ingest=State(settings.STATE_DIR).progress() or None,
    )


def _source(
    kind: Kind,
    row: Shown,
    notes: int,
    run: dict[str, Any] | None,
    live: Callable[[], set[str]],
    shared: bool,
    settings: Settings,
) -> SourceStatus:
    """One row. `shared`: its run log line is also other rows' (the playlists of one run):
    only the failures named under its origin are its own."""
    last = run.get("started") if run else None
    failed = [
        Failure(str(f.get("source")), str(f.get("reason")))
        for f in (run or {}).get("failed", [])
        if isinstance(f, dict) and (not shared or _under(str(f.get("source")), row.origin))
    ]
    waiting, gone = None, 0
    if row.problem is None:
        waiting, gone = kind.waiting(settings, row, live, _timestamp(last))
    return SourceStatus(
        row.origin, row.path, notes, waiting, gone, last, failed, row.problem, row.setting
    )


def _under(source: str, origin: str) -> bool:
    return source == origin or source.startswith(f"{origin}/")


def _timestamp(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return lifecycle.moment(iso).timestamp()
    except ValueError:
        return None


def last_runs(state_dir: Path) -> dict[str, dict[str, Any]]:
    """The last sync of each source folder (key: the folder path it logged): a sync writes one
    line per collection (notes, code), merged here so a failure logged by either is shown."""
    path = state_dir / RUN_LOG_NAME
    try:
        with path.open("rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - RUN_LOG_TAIL))
            tail = log.read().decode("utf-8", "replace")
    except OSError:
        return {}
    lines = tail.splitlines()
    if len(tail.encode()) >= RUN_LOG_TAIL and lines:
        lines = lines[1:]  # the first line may be cut
    last: dict[str, dict[Any, dict[str, Any]]] = {}
    for record in _records(lines):
        per = last.setdefault(str(record.get("source")), {})
        if record.get("collection") is None:
            per.clear()  # an older version's line: one per sync, of every collection
        else:
            per.pop(None, None)
        per[record.get("collection")] = record
    return {source: _merged(list(per.values())) for source, per in last.items()}


def _merged(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One source's last line per collection as one record: the latest start, every failure."""
    latest: dict[str, Any] = max(records, key=lambda r: str(r.get("started") or ""))
    merged = dict(latest)
    merged["failed"] = [f for r in records for f in r.get("failed") or [] if isinstance(f, dict)]
    return merged


def _records(lines: Iterable[str]) -> Iterable[dict[str, Any]]:
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut by a crash: the next ones are still good
        if isinstance(record, dict):
            yield record


def watcher(state_dir: Path) -> WatcherStatus:
    """The watcher's own file (kb watch mode); running only while its process is alive."""
    try:
        data = json.loads((state_dir / WATCHER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return WatcherStatus(running=False)
    if not isinstance(data, dict):
        return WatcherStatus(running=False)
    pid = data.get("pid")
    pid = pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None
    batch = data.get("last_batch_notes")
    return WatcherStatus(
        running=pid is not None and _alive(pid),
        pid=pid,
        started_at=_text(data.get("started_at")),
        folders=[str(f) for f in data.get("folders") or [] if isinstance(f, str)],
        last_batch_at=_text(data.get("last_batch_at")),
        last_batch_notes=batch if isinstance(batch, int) and not isinstance(batch, bool) else None,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False  # it died without removing its file
    except PermissionError:
        return True  # alive, another user's
    return True
