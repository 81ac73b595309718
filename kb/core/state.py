"""The project's own state, in STATE_DIR and never inside the user's notes: the ingest lock,
the embedding cache, the run log, the YouTube details and web pages fetched and, while
`ingest.py --watch` (or MCP_WATCH) runs, the watcher's status file.

It holds note text (the cache's keys are hashes, but its vectors are of the notes; the YouTube
state keeps video details), so it is the user's alone whatever the umask: STATE_DIR (and
QDRANT_PATH, kb.store.edge) is made or set 0700 when opened, the files made here are 0600, and
every process (kb.app.cli.script, the MCP server) first calls `owner_only`, so what libraries
write on their own (SQLite's journal, qdrant-edge's segments) is 0600 too.

Deleting STATE_DIR is always safe: the next ingest embeds again what it needs. Versions before
STATE_DIR kept the cache and the lock in the notes folder; `embed_cache_path` carries an old
cache over (moved, or merged into one already here) so no vector embedded before is lost.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kb.core.errors import IngestBusy, IngestError

log = logging.getLogger(__name__)

LOCK_NAME = "ingest.lock"
CACHE_NAME = "embed-cache.sqlite3"
RUN_LOG_NAME = "runs.jsonl"
YOUTUBE_DIR_NAME = "youtube"  # the YouTube sources' video details and quota ledger
WEB_DIR_NAME = "web"  # the pages the bookmarks source fetched (kb.sources.web)
OLD_CACHE_NAME = ".embed-cache.sqlite3"  # in the notes folder, before STATE_DIR
OLD_LOCK_NAME = ".ingest.lock"
# {"pid", "started_at", "folders", "last_batch_at", "last_batch_notes"} (kb.app.watch writes it,
# status tools read it): a watcher runs while it exists and its pid is alive
WATCHER_NAME = "watcher.json"
# the running ingest's live line (counts only), for another process that waits for the lock
PROGRESS_NAME = "ingest-progress"
JOINING = "joining the ingest"  # how a run waiting for the lock starts its lines
JOIN_POLL_S = 0.5  # how often a process waiting for the lock tries it again
JOIN_SAY_S = 5.0  # ... and says the running ingest's progress at most this often

OWNER_ONLY = 0o077  # umask bits: files this process makes are 0600, folders 0700
PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700

# locks each thread holds (re-entrant per thread): another thread of the same process (the MCP
# server's watcher beside a write tool) opens its own descriptor, which flock then refuses
_local = threading.local()


def _held() -> set[Path]:
    if not hasattr(_local, "held"):
        _local.held = set()
    return _local.held


def owner_only() -> int:
    """From now on, what this process creates is its user's alone (files 0600, folders 0700),
    whatever umask it was started with; only ever tightens the umask. Returns the one before."""
    current = os.umask(OWNER_ONLY)
    os.umask(current | OWNER_ONLY)
    return current


def private_folder(path: Path) -> Path:
    """`path` made if missing (its parents too) and set to 0700: a folder of the project's own
    (an older version may have made it under a looser umask)."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
    if stat.S_IMODE(path.stat().st_mode) != PRIVATE_FOLDER:
        os.chmod(path, PRIVATE_FOLDER)
    return path


def private_file(path: Path) -> Path:
    """`path` made empty if missing and set to 0600, so a library that then opens it (SQLite)
    writes into a file only its user can read."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE))
    if stat.S_IMODE(path.stat().st_mode) != PRIVATE_FILE:
        os.chmod(path, PRIVATE_FILE)
    return path


class State:
    """STATE_DIR; made on first use."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _ready(self) -> Path:
        try:
            private_folder(self.folder)
        except OSError as exc:
            raise IngestError(f"STATE_DIR {self.folder} cannot be made: {exc.strerror}") from None
        return self.folder

    @contextmanager
    def lock(self, joining: Callable[[str], None] | None = None) -> Iterator[None]:
        """Serialise writers: one ingest (or rebuild) per state folder at a time.

        flock is released by the kernel when the holder exits, even on SIGKILL, so a crash never
        leaves a stale lock behind. Taken before opening embedded storage, so a second ingest is
        told about the first rather than about a busy storage folder. Held by another: IngestBusy,
        or with `joining`, wait for it, passing `joining` its progress (PROGRESS_NAME) meanwhile.
        """
        path = (self._ready() / LOCK_NAME).resolve()
        held = _held()
        if path in held:
            yield
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        try:
            said, shown = "", 0.0
            while not _try_lock(fd):
                pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                if joining is None:
                    raise IngestBusy(
                        f"another ingest is running (pid {pid}); wait for it to finish"
                    )
                line = f"{JOINING} running in pid {pid}: {self.progress() or 'starting'}"
                if not said or (line != said and time.monotonic() - shown >= JOIN_SAY_S):
                    joining(line)
                    said, shown = line, time.monotonic()
                time.sleep(JOIN_POLL_S)
            if said and joining is not None:
                joining("that ingest is done; now this one")
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            held.add(path)
            try:
                yield
            finally:
                held.discard(path)
        finally:
            os.close(fd)

    @property
    def progress_path(self) -> Path:
        """The running ingest's live line (PROGRESS_NAME); not made here."""
        return self.folder / PROGRESS_NAME

    def progress(self) -> str:
        """The running ingest's live line, or "" (none yet, or none running)."""
        try:
            return self.progress_path.read_text(encoding="utf-8").strip()
        except OSError:
            return ""

    @property
    def watcher_path(self) -> Path:
        """The watcher's status file (WATCHER_NAME); not made here."""
        return self.folder / WATCHER_NAME

    def watcher_pid(self) -> int | None:
        """The pid watcher.json names (its process may have ended); None without one."""
        try:
            pid = json.loads(self.watcher_path.read_text(encoding="utf-8")).get("pid")
        except (OSError, ValueError, AttributeError):
            return None
        return pid if isinstance(pid, int) else None

    def embed_cache_path(self, notes_dir: Path | None = None) -> Path:
        """The cache file, after carrying over one left in `notes_dir` by an older version
        (call it holding the lock)."""
        path = self._ready() / CACHE_NAME
        if notes_dir is not None:
            _carry_over_cache(notes_dir / OLD_CACHE_NAME, path)
            _remove_old_lock(notes_dir / OLD_LOCK_NAME)
        return private_file(path)

    def youtube_dir(self) -> Path:
        """Where the YouTube sources keep what they fetched (video details, units spent)."""
        return private_folder(self._ready() / YOUTUBE_DIR_NAME)

    def web_dir(self) -> Path:
        """Where the bookmarks source keeps the pages it fetched (their text: owner-only)."""
        return private_folder(self._ready() / WEB_DIR_NAME)

    def log_run(self, record: dict[str, Any]) -> None:
        """Append one JSON line about a run (counts and paths, never note text)."""
        path = self._ready() / RUN_LOG_NAME
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _carry_over_cache(old: Path, new: Path) -> None:
    if not old.is_file() or old.is_symlink():
        return
    if not new.exists():
        try:
            os.replace(old, new)  # same filesystem: atomic
        except OSError:
            shutil.copy2(old, new)
            old.unlink()
        log.info("moved the embedding cache from %s to %s", old, new)
        return
    with sqlite3.connect(new) as db:  # both exist: keep every vector of either
        db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)"
        )
        db.execute("ATTACH DATABASE ? AS old", (str(old),))
        db.execute("INSERT OR IGNORE INTO vectors SELECT key, vector FROM old.vectors")
        db.commit()
        db.execute("DETACH DATABASE old")
    old.unlink()
    log.info("merged the embedding cache %s into %s", old, new)


def _remove_old_lock(old: Path) -> None:
    """An older version's lock file in the notes folder; removed unless that version holds it."""
    try:
        fd = os.open(old, os.O_RDWR)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        old.unlink()
    except OSError:
        pass  # held (an older ingest is running) or already gone: leave it
    finally:
        os.close(fd)
