"""Watch mode: the inbox NOTES_DIR and every NOTE_FOLDERS folder, synced as they change.

`watchfiles` reports changed paths in debounced batches (a burst such as a `git checkout` or an
editor's temp-file dance arrives as one set; a rename as delete + add). Each path only marks
its source dirty; a batch then runs the ordinary convergent sync (kb.app.ingest.run) of the dirty
sources under the ingest lock, so what the files are *now* decides, whatever the order of the
events. Changes made while a batch runs are buffered by the watcher and make the next batch.

The first batch syncs every source (what changed while nobody watched). A batch that fails
(the embedder restarting, Qdrant away, another ingest holding the lock, a folder unmounted, or
a bug: logged with its traceback, the watch goes on) keeps its dirty sources and is tried
again with a growing delay: a change is delayed, never lost. `stop` (Ctrl-C, the MCP server
shutting down) ends the watch after the current batch, and a wait for the embedder still
loading its model before one (nothing of it done yet).

While watching, STATE_DIR/watcher.json says so (kb.core.state.WATCHER_NAME); it is removed on exit.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import watchfiles

from kb.app.backend import Backend
from kb.app.ingest import run
from kb.core.errors import ConfigError, EmbedError, KbError
from kb.core.schema import INBOX
from kb.core.state import State
from kb.ingest.options import IngestOptions
from kb.ingest.progress import ConsoleProgress, Progress, Summary
from kb.sources import registry
from kb.sources.files import INGESTED, is_editor_file

log = logging.getLogger(__name__)

QUIET_MS = 300  # a batch closes once the files have been quiet this long
DEBOUNCE_MS = 3000  # ... or once it has collected this long (a long burst: several batches)
TICK_MS = 500  # an idle watcher wakes this often (stop, retries)
RETRY_S = (1.0, 60.0)  # first and longest wait before trying a failed batch again


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Watcher:
    """Watches what `backend.settings` names and syncs it through `backend` (see the module
    docstring). ConfigError at construction for a bad NOTE_FOLDERS."""

    def __init__(
        self,
        backend: Backend,
        *,
        stop: threading.Event,
        progress: Progress | None = None,
        quiet_ms: int = QUIET_MS,
        debounce_ms: int = DEBOUNCE_MS,
        retry_s: tuple[float, float] = RETRY_S,
    ) -> None:
        self.backend = backend
        self.settings = backend.settings
        self.stop = stop
        self.progress = progress
        self.quiet_ms = quiet_ms
        self.debounce_ms = debounce_ms
        self.retry_s = retry_s
        if not self.settings.NOTES_DIR.is_dir():
            raise ConfigError(f"NOTES_DIR {self.settings.NOTES_DIR} is not a folder")
        places = registry.places(self.settings)  # the inbox and the folders, checked
        self.roots: dict[str, Path] = {name: path.resolve() for name, path in places.items()}
        self.ingested = self.roots[INBOX] / INGESTED
        self.state = State(self.settings.STATE_DIR)
        self.batches = 0  # batches synced (the first, full one included)
        self.failures = 0  # batches that failed and were kept for a retry
        self.last: Summary | None = None  # the last batch's summary
        self.started = threading.Event()  # set once files are watched
        self._status: dict[str, object] = {
            "pid": os.getpid(),
            "started_at": _now(),
            "folders": [name for name in self.roots if name != INBOX],
            "last_batch_at": None,
            "last_batch_notes": 0,
        }

    def origin_of(self, change: watchfiles.Change, path: str) -> str | None:
        """The source a changed path makes dirty, or None when it cannot change any note:
        hidden files and folders and editor files (the gates skip them), the inbox's own moves
        into ingested/, and a file leaving the inbox (the inbox lists only what waits)."""
        where = Path(path)
        for origin, root in self.roots.items():
            if not where.is_relative_to(root) or where == root:
                continue
            parts = where.relative_to(root).parts
            if any(part.startswith(".") for part in parts) or is_editor_file(parts[-1]):
                return None
            if origin == INBOX and (
                where.is_relative_to(self.ingested) or change == watchfiles.Change.deleted
            ):
                return None
            return origin
        return None

    def run(self) -> None:
        """Watch until `stop` is set; watcher.json exists meanwhile."""
        self._write_status()
        dirty = set(self.roots)  # first: everything (what changed while nobody watched)
        wait, next_try = 0.0, 0.0
        try:
            changes_seen = watchfiles.watch(
                *self.roots.values(),
                watch_filter=watchfiles.DefaultFilter(ignore_paths=[self.ingested]),
                debounce=self.debounce_ms,
                step=self.quiet_ms,
                stop_event=self.stop,
                rust_timeout=TICK_MS,
                yield_on_timeout=True,
            )
            log.info("watching %s", ", ".join(str(root) for root in self.roots.values()))
            for changes in changes_seen:
                self.started.set()
                dirty |= {o for change, path in changes if (o := self.origin_of(change, path))}
                if self.stop.is_set():
                    break
                if not dirty or time.monotonic() < next_try:
                    continue
                if self.sync(dirty):
                    dirty, wait = set(), 0.0
                elif self.stop.is_set():
                    break
                else:
                    wait = min(self.retry_s[1], max(self.retry_s[0], wait * 2))
                    next_try = time.monotonic() + wait
                    log.warning("watch: trying again in %.1fs; the changes are kept", wait)
        finally:
            self.started.set()
            self.state.watcher_path.unlink(missing_ok=True)
            if dirty:
                log.info("watch stopped; %d sources are synced by the next run", len(dirty))

    def sync(self, origins: set[str]) -> bool:
        """One batch: the convergent sync of `origins`; False (logged) when it must be retried."""
        try:
            self._wait_for_embedder()
            options = IngestOptions(only=frozenset(origins), progress=self.progress)
            with self.state.lock():
                summary = run(self.settings, self.backend.client, self.backend.store(), options)
        except KbError as exc:
            if self.stop.is_set():
                return False  # stopped before the batch: "watch stopped" says what is left
            self.failures += 1
            log.warning("watch: syncing %s failed: %s", ", ".join(sorted(origins)), exc)
            return False
        except Exception:
            self.failures += 1
            log.exception("watch: syncing %s failed (a bug: please report it)",
                          ", ".join(sorted(origins)))  # fmt: skip
            return False
        self.batches += 1
        self.last = summary
        changed = (
            len(summary.added) + len(summary.replaced) + len(summary.restored)
            + len(summary.deleted) + len(summary.removed) + len(summary.unindexed)
        )  # fmt: skip
        log.info(
            "watch: synced %s: %d added, %d replaced, %d deleted, %d restored, %d failed "
            "(%.1fs)",
            ", ".join(sorted(origins)), len(summary.added), len(summary.replaced),
            len(summary.deleted), len(summary.restored), len(summary.failed), summary.seconds,
        )  # fmt: skip
        for failure in summary.failed:
            log.warning("watch: %s not ingested: %s", failure.source, failure.reason)
        self._status |= {"last_batch_at": _now(), "last_batch_notes": changed}
        self._write_status()
        return True

    def _wait_for_embedder(self) -> None:
        """While the embedder loads its model (503), wait here, where `stop` ends the wait:
        nothing of the batch is done yet, so a stop need not sit out a slow load."""
        client = self.backend.client
        try:
            client.health()
        except EmbedError as exc:
            if exc.status == 503:
                client.wait_ready(timeout=client.timeout, stop=self.stop)
            # anything else: the run says it

    def _write_status(self) -> None:
        """watcher.json, replaced atomically (a reader never sees half a file)."""
        path = self.state.watcher_path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_name(f".{path.name}.{os.getpid()}.part")
            part.write_text(json.dumps(self._status) + "\n", encoding="utf-8")
            os.replace(part, path)
        except OSError as exc:  # a status file is no reason to stop syncing notes
            log.warning("watch: cannot write %s: %s", path, exc.strerror)


@contextmanager
def in_background(backend: Backend) -> Iterator[Watcher]:
    """A Watcher in a daemon thread for the life of the block (the MCP server with MCP_WATCH,
    sharing its store: embedded storage opens in one process only); stopped after its batch, or
    while it waits for the embedder before one."""
    stop = threading.Event()
    # make local's console: the ingest's progress line, as ingest.py prints it to a log
    watcher = Watcher(backend, stop=stop, progress=ConsoleProgress(sys.stderr, tty=False))

    def watch() -> None:
        try:
            watcher.run()
        except Exception:  # a bug: said loudly, the server keeps answering searches
            log.exception("the watcher stopped")

    thread = threading.Thread(target=watch, name="watcher", daemon=True)
    thread.start()
    try:
        yield watcher
    finally:
        stop.set()
        thread.join(timeout=120)
