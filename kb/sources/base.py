"""What a source of notes is, for ingest: a listing of what it holds now, a way to read each
item, and a hook that runs once an item's points are stored.

A source names each item by `source` (a POSIX path relative to its root; the payload field and
half of the point id), so the same note always lands on the same points. kb.ingest.plan compares a
listing with what the collection holds; kb.ingest.run embeds and writes what changed, then calls
`after_store`. Adding a kind of source (a folder indexed in place, a video list) is one module
implementing this protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kb.content.notes import Note


@dataclass(frozen=True)
class Failure:
    source: str  # the item's name as the user sees it (path relative to the source's root)
    reason: str


@dataclass(frozen=True)
class Item:
    source: str  # name in the collection
    path: Path  # where to read it
    shown: str  # how summaries name it (e.g. `ingested/a.md` for an inbox note already moved)
    pending: bool = True  # needs after_store (an inbox note still in the inbox)
    replaces: bool = False  # an earlier version of the note is being replaced


@dataclass
class Listing:
    items: list[Item] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)  # refused: named, left untouched
    ignored: list[str] = field(default_factory=list)  # not notes (other file kinds)
    skipped: dict[str, int] = field(default_factory=dict)  # files skipped, by gate (hidden ...)
    skipped_paths: list[tuple[str, str]] = field(default_factory=list)  # (shown path, gate)


class Source(Protocol):
    root: Path  # the folder the source reads (the lock and state never go inside it)
    origin: str  # the payload field `origin` of its notes: "inbox" or a NOTE_FOLDERS name
    complete: bool  # every listing names everything it holds: a stored note missing is gone

    def listing(self, *, everything: bool) -> Listing:
        """What to ingest now; with `everything`, also what was stored before (a full build)."""
        ...

    def read(self, item: Item, *, max_bytes: int) -> Note:
        """The item as a note; NoteError/OSError for one that cannot be read."""
        ...

    def holds(self, source: str) -> bool:
        """Whether a stored note still has its item (else a full build removes its points)."""
        ...

    def after_store(self, items: Sequence[Item]) -> list[OSError | None]:
        """Called once the items' points are stored; per item None, or the error that means it
        must be redone by the next run."""
        ...

    def finish(self) -> None:
        """The run is over (also after an error): tidy up what the run left behind."""
        ...
