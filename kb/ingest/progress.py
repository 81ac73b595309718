"""Ingest progress: one live line on a terminal, plain periodic lines otherwise, and the summary.

Only paths and counts are printed, never note text.
"""

from __future__ import annotations

import io
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kb.core.limits import escaped
from kb.sources.base import Failure


@dataclass
class Summary:
    """What a run did. Each note is in exactly one of added, replaced, unchanged, restored,
    private, failed."""

    added: list[str] = field(default_factory=list)  # new notes, stored
    replaced: list[str] = field(default_factory=list)  # stored again: an earlier version replaced
    unchanged: list[str] = field(default_factory=list)  # already stored so: nothing written
    failed: list[Failure] = field(default_factory=list)  # not ingested; left where they are
    restored: list[str] = field(default_factory=list)  # soft-deleted, back unchanged: 0 embeds
    private: list[str] = field(default_factory=list)  # private notes: never embedded or stored
    # stored notes taken out of the index because they are private now (or their `private`
    # field is unclear: those are in failed): points deleted
    unindexed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # full build: files gone, points deleted
    deleted: list[str] = field(default_factory=list)  # folder files gone: notes soft-deleted
    ignored: list[str] = field(default_factory=list)  # files of kinds not indexed
    # indexed, but in a lesser way, with the reason (a .py that does not parse: line windows)
    notices: list[Failure] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # files skipped, by gate (hidden ...)
    redacted: dict[str, int] = field(default_factory=dict)  # note -> secrets kept out of the index
    # note -> what its links to notes that are not indexed name (counted, never printed)
    unresolved: dict[str, list[str]] = field(default_factory=dict)
    skipped_paths: list[tuple[str, str]] = field(default_factory=list)  # (path, gate): -v
    chunks: int = 0  # chunks of the notes handled (added, replaced, unchanged)
    embedded_cached: int = 0  # chunks whose vector came from the embedding cache
    written: int = 0  # points written (upserted) to the collection
    seconds: float = 0.0
    rebuilt: bool = False

    @property
    def ingested(self) -> list[str]:
        """Every note now stored as it is (added, replaced, restored or already up to date)."""
        return [*self.added, *self.replaced, *self.unchanged, *self.restored]

    def add(self, other: Summary) -> None:
        """Count another source's run in this one (a run syncs the inbox and every folder)."""
        for name in ("added", "replaced", "unchanged", "restored", "private", "unindexed",
                     "failed", "removed", "deleted", "ignored", "notices"):  # fmt: skip
            getattr(self, name).extend(getattr(other, name))
        self.skipped_paths.extend(other.skipped_paths)
        for reason, count in other.skipped.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + count
        self.redacted.update(other.redacted)
        self.unresolved.update(other.unresolved)
        self.chunks += other.chunks
        self.embedded_cached += other.embedded_cached
        self.written += other.written
        self.seconds += other.seconds
        self.rebuilt = self.rebuilt or other.rebuilt

    def to_json(self) -> dict[str, Any]:
        """Its one wire form (the MCP server's ingest, answered to ingest.py): JSON values."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> Summary:
        """The summary to_json wrote; TypeError or ValueError for anything else."""
        if not isinstance(data, dict):
            raise ValueError("a summary is a JSON object")
        values = dict(data)
        for name in ("failed", "notices"):
            values[name] = [Failure(**f) for f in values.get(name, [])]
        values["skipped_paths"] = [(str(p), str(g)) for p, g in values.get("skipped_paths", [])]
        return cls(**values)

    @property
    def embedded(self) -> int:
        """Chunks the embedder embedded (written, less the vectors the cache gave)."""
        return max(0, self.written - self.embedded_cached)

    @property
    def chunks_per_s(self) -> float:
        """Chunks embedded per second: the embedder's pace (0 when it embedded nothing)."""
        return self.embedded / self.seconds if self.seconds > 0 else 0.0


class Progress:
    """Receives ingest events. This base class ignores them (in-process callers, tests)."""

    def start(self, notes: int, chunks: int) -> None:
        """About to embed `notes` notes made of `chunks` chunks: one source's, into one
        collection (a run syncs several, each started and finished in turn)."""

    def failed(self, failure: Failure) -> None:
        """A file was not ingested; it stays where it is."""

    def findable(self, notes: int, chunks: int) -> None:
        """These notes' points are stored by their words alone: keyword search finds them;
        their meaning follows (`embedding`, then `done` for each)."""

    def embedding(self, notes: int, chunks: int) -> None:
        """About to embed these notes (all the others are done); the pace starts here."""

    def stored(self, sources: Sequence[str]) -> None:
        """Qdrant acknowledged these notes' points; inbox files are not moved yet."""

    def done(self, source: str, chunks: int) -> None:
        """A note is stored and, if it came from the inbox, moved to ingested/."""

    def settled(self) -> None:
        """A group of notes is done: what is kept for others to read (RecordedProgress) is
        brought up to date; a console waits for its interval."""

    def finish(self, summary: Summary) -> None:
        """The run ended (also called when it stopped early)."""


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = width * done // total if total > 0 else width
    return "[" + "#" * filled + "." * (width - filled) + "]"


class ConsoleProgress(Progress):
    """Notes and chunks done of total, chunks/s and time left, and while embedding follows the
    words, the notes findable by their words so far: one line, the same wherever it is shown
    (ingest.py, the ingest-progress file that `status`, the dashboard and a joining ingest
    read). Redrawn in place behind a bar on a TTY, a plain line every `interval` s otherwise
    (logs, CI). Failed files are listed once, by the summary (format_summary)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        tty: bool | None = None,
        interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.interval = interval
        self.clock = clock
        self.notes_total = self.chunks_total = self.notes_done = self.chunks_done = 0
        self.words_only = 0  # notes stored by their words alone, their meaning not yet
        self.started = self.last_line = 0.0
        self._paced_from = (0.0, 0)  # (time, chunks done) the pace is measured from
        self._embedding = False  # `embedding` was called: each note done was words-only
        self._shown = 0  # notes_done when the last counts line was written
        self._live = False  # a TTY line is drawn and must be cleared before other output

    def start(self, notes: int, chunks: int) -> None:
        # counts are per source: done ones from the source before must not count against these
        self.notes_total, self.chunks_total = notes, chunks
        self.notes_done = self.chunks_done = self.words_only = self._shown = 0
        self.started = self.last_line = self.clock()
        self._paced_from, self._embedding = (self.started, 0), False
        self._write(f"ingesting {notes} notes ({chunks} chunks)", live=False)

    def findable(self, notes: int, chunks: int) -> None:
        self.words_only += notes
        self._tick()

    def embedding(self, notes: int, chunks: int) -> None:
        # unchanged notes and cached vectors were done at once: the pace counts embedding only
        self._paced_from, self._embedding = (self.clock(), self.chunks_done), True

    def done(self, source: str, chunks: int) -> None:
        self.notes_done += 1
        self.chunks_done += chunks
        if self._embedding:
            self.words_only = max(0, self.words_only - 1)
        self._tick()

    def failed(self, failure: Failure) -> None:
        if self._embedding:  # stored whole, but not handed over
            self.words_only = max(0, self.words_only - 1)

    def _tick(self) -> None:
        now = self.clock()
        if self.tty or now - self.last_line >= self.interval:
            self.last_line, self._shown = now, self.notes_done
            self._write(self.line(now), live=self.tty)

    def finish(self, summary: Summary) -> None:
        if self._live:
            self.stream.write("\r\x1b[K")
            self._live = False
        elif not self.tty and self.notes_done != self._shown:
            self._write(self.line(), live=False)  # logs end with the final counts
            self._shown = self.notes_done
        self.stream.flush()

    def line(self, now: float | None = None) -> str:
        now = self.clock() if now is None else now
        since, base = self._paced_from
        paced = self.chunks_done - base
        rate = paced / (now - since) if now > since and paced > 0 else 0.0
        left = self.chunks_total - self.chunks_done
        eta = _duration(left / rate) if rate > 0 else "?"
        words = (
            f"; {self.notes_done + self.words_only}/{self.notes_total} notes findable by words"
            if self.words_only
            else ""
        )
        return (
            f"{self.notes_done}/{self.notes_total} notes, "
            f"{self.chunks_done}/{self.chunks_total} chunks, {rate:.1f} chunks/s, ETA {eta}"
            f"{words}"
        )

    def _write(self, text: str, *, live: bool) -> None:
        if self.tty:
            shown = f"{_bar(self.chunks_done, self.chunks_total)} {text}" if live else text
            self.stream.write("\r\x1b[K" + shown + ("" if live else "\n"))
        else:
            self.stream.write(text + "\n")
        self._live = live
        self.stream.flush()


class RecordedProgress(ConsoleProgress):
    """ConsoleProgress's line kept in the file `path` (replaced whole, removed when the run
    ends), so that a process waiting for this run shows how far it is (kb.core.state's lock);
    every event also goes on to `inner`."""

    def __init__(self, path: Path, inner: Progress | None) -> None:
        super().__init__(io.StringIO(), tty=False, interval=1.0)
        self.path = path
        self.inner = inner or Progress()

    def start(self, notes: int, chunks: int) -> None:
        super().start(notes, chunks)
        self.inner.start(notes, chunks)

    def findable(self, notes: int, chunks: int) -> None:
        super().findable(notes, chunks)
        self.inner.findable(notes, chunks)

    def embedding(self, notes: int, chunks: int) -> None:
        super().embedding(notes, chunks)
        self.inner.embedding(notes, chunks)

    def failed(self, failure: Failure) -> None:
        super().failed(failure)
        self.inner.failed(failure)

    def stored(self, sources: Sequence[str]) -> None:
        self.inner.stored(sources)

    def done(self, source: str, chunks: int) -> None:
        super().done(source, chunks)
        self.inner.done(source, chunks)

    def settled(self) -> None:
        self.last_line, self._shown = self.clock(), self.notes_done
        self._write(self.line(), live=False)
        self.inner.settled()

    def finish(self, summary: Summary) -> None:
        self.inner.finish(summary)
        self.path.unlink(missing_ok=True)

    def _write(self, text: str, *, live: bool) -> None:
        part = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")
        try:
            part.write_text(text + "\n", encoding="utf-8")
            os.replace(part, self.path)
        except OSError:
            pass  # a progress line is no reason to stop an ingest


def format_summary(summary: Summary, *, verbose: bool = False) -> str:
    """The end-of-run report: counts, speed, and every failed file with its reason; `verbose`
    (ingest.py -v) also names every skipped file with its gate and every ignored file."""
    verb = "rebuilt: ingested" if summary.rebuilt else "ingested"
    removed = f", {len(summary.removed)} removed (files gone)" if summary.removed else ""
    restored = f", {len(summary.restored)} restored" if summary.restored else ""
    deleted = (
        f", {len(summary.deleted)} deleted (files gone; kept, hidden)" if summary.deleted else ""
    )
    private = f", {len(summary.private)} private (not indexed)" if summary.private else ""
    unindexed = (
        f", {len(summary.unindexed)} taken out of the index (private)" if summary.unindexed else ""
    )
    # a pace only for what was embedded: unchanged notes cost no embedding
    pace = f", {summary.chunks_per_s:.1f} chunks/s embedded" if summary.embedded else ""
    lines = [
        f"{verb} {len(summary.ingested)} notes ({summary.chunks} chunks) in "
        f"{summary.seconds:.1f}s{pace}: {len(summary.added)} new, "
        f"{len(summary.replaced)} replaced, {len(summary.unchanged)} already up to date"
        f"{restored}{private}{unindexed}{removed}{deleted}; "
        f"{summary.embedded_cached} chunk vectors reused; failed {len(summary.failed)}"
    ]
    lines += [f"  failed: {f.source}: {f.reason}" for f in summary.failed]
    lines += [f"  note: {f.source}: {f.reason}" for f in summary.notices]
    if summary.ignored:
        few = summary.ignored if verbose else summary.ignored[:5]
        shown = ", ".join(few) + (", ..." if len(summary.ignored) > len(few) else "")
        lines.append(
            f"  ignored {len(summary.ignored)} files of kinds not indexed "
            f"(INDEX_EXTENSIONS): {shown}"
        )
    if summary.skipped:
        counts = ", ".join(f"{n} {reason}" for reason, n in sorted(summary.skipped.items()))
        lines.append(f"  skipped: {counts}")
    if summary.redacted:
        lines.append(
            f"  redacted {sum(summary.redacted.values())} secrets in {len(summary.redacted)} "
            "notes (the files keep them): "
            + ", ".join(f"{name} ({n})" for name, n in sorted(summary.redacted.items()))
        )
    if summary.unresolved:
        few = sorted(summary.unresolved) if verbose else sorted(summary.unresolved)[:5]
        more = ", ..." if len(summary.unresolved) > len(few) else ""
        lines.append(
            f"  {sum(len(t) for t in summary.unresolved.values())} links name notes that are not "
            f"indexed, in {len(summary.unresolved)} notes (the status tool lists them): "
            + ", ".join(few)
            + more
        )
    if verbose:
        lines += [f"  skipped {path} ({gate})" for path, gate in summary.skipped_paths]
    lines += [f"  deleted: {name}" for name in summary.deleted]
    return "\n".join(escaped(line) for line in lines)  # file names may hold ESC sequences
