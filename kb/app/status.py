"""What the knowledge base holds and what waits, in one place: the MCP tool `status()` and the
dashboard's status page both show this.

Read-only and cheap: facet counts from the store, the run log and the watcher file from
STATE_DIR, and a walk of each source's folder (names and modification times, never contents).
"What waits" is, for the inbox, every note file still in it (ingesting moves them out); for a
NOTE_FOLDERS folder, the files new since its last sync or modified after it started, plus the
stored notes whose file is gone (its next sync soft-deletes them). The links that name notes
that are not indexed (a vault's health: a note not written yet, renamed or deleted) are listed
from the index (kb.search.related).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kb.core.errors import ConfigError, StoreError
from kb.core.schema import INBOX, ORIGIN
from kb.core.settings import Settings, from_root
from kb.core.state import RUN_LOG_NAME, State
from kb.ingest import lifecycle, switch
from kb.ingest import plan as sync
from kb.search.related import UnresolvedLink, unresolved_links
from kb.sources.files import INGESTED, discover, git_files
from kb.sources.folder import parse
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
    name: str  # "inbox" or a NOTE_FOLDERS name: the notes' `origin`
    path: str  # the folder, as this process sees it
    notes: int  # live notes stored from it (soft-deleted ones not counted)
    waiting: int | None  # files not ingested yet, or changed since its last sync; None: unseen
    gone: int  # stored notes whose file left the folder (soft-deleted by its next sync)
    last_sync: str | None  # when its last sync started (UTC, ISO)
    failed: list[Failure]  # files its last sync could not ingest, with the reason
    problem: str | None  # why its folder cannot be read from here (e.g. not mounted)


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
    folders, sources_problem = _folders(settings)
    roots = [(INBOX, settings.NOTES_DIR), *folders]
    counts: dict[str, int] = {}
    stored: dict[str, dict[str, dict[str, str]]] = {}
    problem = sources_problem
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
            stored = {name: store.fingerprints(origin=name) for name, _ in folders}
            broken, unresolved = unresolved_links(store)
            unembedded = store.unembedded()
            under_way = switch.progress(store)
            if under_way is not None:
                switching = SwitchStatus(**asdict(under_way))
    except StoreError as exc:
        problem = str(exc)
    sources = [
        _source(name, root, counts.get(name, 0), runs.get(str(root)), stored.get(name), settings)
        for name, root in roots
    ]
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


def _folders(settings: Settings) -> tuple[list[tuple[str, Path]], str | None]:
    try:
        return [(name, from_root(Path(path))) for name, path in parse(settings.NOTE_FOLDERS)], None
    except ConfigError as exc:
        return [], str(exc)


def _source(
    name: str,
    root: Path,
    notes: int,
    run: dict[str, Any] | None,
    stored: dict[str, dict[str, str]] | None,
    settings: Settings,
) -> SourceStatus:
    last = run.get("started") if run else None
    failed = [
        Failure(str(f.get("source")), str(f.get("reason")))
        for f in (run or {}).get("failed", [])
        if isinstance(f, dict)
    ]
    if not root.is_dir():
        where = "NOTES_DIR" if name == INBOX else f"NOTE_FOLDERS {name}"
        problem = f"{where} {root} is not a folder here (not mounted, or on another machine)"
        return SourceStatus(name, str(root), notes, None, 0, last, failed, problem)
    if name == INBOX:
        waiting = len(discover(root, root, leave_out=INGESTED).files)
        return SourceStatus(name, str(root), notes, waiting, 0, last, failed, None)
    tracked = git_files(root) if settings.NOTE_FOLDERS_GIT else None
    files = {f"{name}/{rel}": path for path, rel in discover(root, root, tracked=tracked).files}
    stored = stored or {}
    live = {s for s, points in stored.items() if not sync.deleted(points)}
    since = _timestamp(last)
    waiting = sum(1 for s, path in files.items() if s not in live or _modified_after(path, since))
    gone = len(live - files.keys())
    return SourceStatus(name, str(root), notes, waiting, gone, last, failed, None)


def _timestamp(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return lifecycle.moment(iso).timestamp()
    except ValueError:
        return None


def _modified_after(path: Path, since: float | None) -> bool:
    try:
        # the log keeps whole seconds: a file saved within the run's first second counts as
        # seen, not as waiting forever after
        return since is None or path.stat().st_mtime >= since + 1
    except OSError:
        return False  # gone meanwhile: the next look sees it


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
