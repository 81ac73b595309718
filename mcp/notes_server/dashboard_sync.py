"""The dashboard's Sync button: the same sync as `uv run ingest.py`, run in this process in a
worker thread under the ingest lock, its log kept in memory and streamed to the page.

One sync at a time: a second press while this server's sync runs is told so, and one started
while `ingest.py` or the watcher holds the lock gets the lock's own message (with that pid).
Lines are paths and counts only, as the host script prints them, never note text. A file's name
may hold line breaks and other control characters: in the log they are shown escaped (`\\n`),
so a name is always part of one line and can never forge another one.

A sibling module of server.py (this folder is not a package).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from kb.app.backend import Backend
from kb.app.ingest import run
from kb.core.errors import ConfigError, IngestBusy, IngestError, KbError
from kb.core.state import State
from kb.ingest.lifecycle import now_iso
from kb.ingest.options import IngestOptions
from kb.ingest.progress import Progress, Summary, format_summary
from kb.sources import registry
from kb.sources.base import Failure

START_WAIT_S = 10.0  # how long a press waits to learn whether the lock was free
POLL_S = 0.1  # how often a stream looks for new lines

log = logging.getLogger("mcp-server")
# What would break a line or change how it reads: C0 and C1 controls (tab aside), the Unicode
# line and paragraph separators, and the bidirectional overrides and isolates.
UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` on one line: each character UNPRINTABLE matches written as its escape (\\n)."""
    return UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def printable_fields(value: Any) -> Any:
    """A copy of `value` (a summary, a failure, their lists and dicts) with every string in it
    made `printable`, so that format_summary's lines are lines of its own."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list | tuple):
        return type(value)(printable_fields(item) for item in value)
    if isinstance(value, dict):
        return {printable_fields(k): printable_fields(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: printable_fields(getattr(value, f.name))
                   for f in dataclasses.fields(value) if f.init}  # fmt: skip
        return dataclasses.replace(value, **changes)
    return value


class Busy(Exception):
    """A sync is already running (here, or in another process holding the ingest lock)."""


@dataclass
class SyncRun:
    started_at: str
    lines: list[str] = field(default_factory=list)
    done: bool = False
    ok: bool = False
    locked: threading.Event = field(default_factory=threading.Event)  # lock taken, or gave up
    busy: str | None = None  # why it could not start: the lock was held
    _mutex: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, text: str) -> None:
        """One line (made printable: whatever it quotes stays on it)."""
        with self._mutex:
            self.lines.append(printable(text))

    def add_summary(self, summary: Summary) -> None:
        """format_summary's lines, the names in them made printable first."""
        with self._mutex:
            self.lines.extend(format_summary(printable_fields(summary)).split("\n"))

    def since(self, start: int) -> tuple[list[str], bool]:
        """Lines from `start` on, and whether the run is over (read together)."""
        with self._mutex:
            return self.lines[start:], self.done

    def finish(self, ok: bool) -> None:
        with self._mutex:
            self.done, self.ok = True, ok
        self.locked.set()


class LineProgress(Progress):
    """Ingest events as log lines (what ConsoleProgress prints to a log, plus each note)."""

    def __init__(self, out: SyncRun) -> None:
        self.out = out

    def start(self, notes: int, chunks: int) -> None:
        self.out.add(f"ingesting {notes} notes ({chunks} chunks)")

    def failed(self, failure: Failure) -> None:
        self.out.add(f"failed: {failure.source}: {failure.reason}")

    def done(self, source: str, chunks: int) -> None:
        self.out.add(f"stored {source} ({chunks} chunks)")


class RunLog(logging.Handler):
    """kb's own INFO lines (soft deletes, private notes) from the sync's thread only."""

    def __init__(self, out: SyncRun, thread: int) -> None:
        super().__init__(logging.INFO)
        self.out, self.thread = out, thread

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.out.add(record.getMessage())


class SyncRunner:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.current: SyncRun | None = None
        self._mutex = threading.Lock()

    def unreachable(self) -> str | None:
        """Why this server cannot sync the user's folders (None when it can)."""
        settings = self.backend.settings
        if not settings.NOTES_DIR.is_dir():
            return (
                f"this server cannot see your notes: NOTES_DIR {settings.NOTES_DIR} is not a "
                "folder here (the Docker image does not mount your notes)"
            )
        try:
            registry.places(settings)
        except ConfigError as exc:
            return f"this server cannot sync your folders: {exc}"
        return None

    def start(self) -> SyncRun:
        """Start a sync in a worker thread and wait until it holds the ingest lock; Busy when
        one is running here or elsewhere."""
        with self._mutex:
            if self.current is not None and not self.current.done:
                raise Busy(
                    f"a sync started from this page at {self.current.started_at} is still "
                    "running: its log is below"
                )
            current = SyncRun(started_at=now_iso())
            self.current = current
            threading.Thread(target=self._run, args=(current,), daemon=True).start()
        current.locked.wait(START_WAIT_S)
        if current.busy:
            raise Busy(current.busy)
        return current

    def _run(self, out: SyncRun) -> None:
        handler = RunLog(out, threading.get_ident())
        kb_log = logging.getLogger("kb")
        kb_log.addHandler(handler)
        settings = self.backend.settings
        summary: Summary | None = None
        try:
            with State(settings.STATE_DIR).lock():
                out.locked.set()
                out.add(f"sync started {out.started_at}")
                log.info("dashboard sync started")
                options = IngestOptions(progress=LineProgress(out))
                summary = run(settings, self.backend.client, self.backend.store(), options)
        except IngestBusy as exc:
            out.busy = f"{exc} (ingest.py or the watcher)"
            out.add(f"error: {out.busy}")
        except KbError as exc:
            if isinstance(exc, IngestError) and exc.summary is not None:
                out.add_summary(exc.summary)
            out.add(f"error: {exc}")
        else:
            out.add_summary(summary)
        finally:
            kb_log.removeHandler(handler)
            failed = summary is None or bool(summary.failed)
            log.info("dashboard sync finished (%s)", "with failures" if failed else "ok")
            out.finish(ok=summary is not None and not summary.failed)


async def stream(out: SyncRun | None) -> AsyncIterator[dict[str, str]]:
    """Server-sent events: each log line, then `end` (ok / failed) once the run is over."""
    if out is None:
        yield {"event": "line", "data": "no sync has run since this server started"}
        yield {"event": "end", "data": "none"}
        return
    sent = 0
    while True:
        lines, done = out.since(sent)
        for line in lines:
            yield {"event": "line", "data": line}
        sent += len(lines)
        if done and not lines:
            yield {"event": "end", "data": "ok" if out.ok else "failed"}
            return
        await anyio.sleep(POLL_S)
