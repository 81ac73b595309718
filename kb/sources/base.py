"""What a source of notes is, for ingest: a listing of what it holds now, a way to read each
item, a hook that runs once an item's points are stored, and the few ways sources differ.

A source names each item by `source` (a POSIX path relative to its root; the payload field and
half of the point id), so the same note always lands on the same points. kb.ingest.plan compares a
listing with what the collection holds; kb.ingest.run embeds and writes what changed, then calls
`after_store`. kb.ingest knows no kind of source: what differs between them (the collections
their items go to, why a note whose item is gone was deleted, the fields a listing reads again,
how the mass-deletion guard names what is gone) is asked of the source through this protocol.
Adding a kind of source is one module implementing it (SourceDefaults holds the hooks as a
source of files has them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from kb.content.notes import Note
from kb.core.kinds import CODE, PROSE, Domain
from kb.core.limits import MAX_NAME, bounded, escaped
from kb.core.schema import FILE_DELETED


@dataclass(frozen=True)
class Failure:
    source: str  # the item's name as the user sees it (path relative to the source's root)
    reason: str

    def __post_init__(self) -> None:  # the one place a failure's words are bounded
        object.__setattr__(self, "source", escaped(self.source[:MAX_NAME]))
        object.__setattr__(self, "reason", bounded(self.reason))


@dataclass(frozen=True)
class Item:
    source: str  # name in the collection
    path: Path  # where to read it
    shown: str  # how summaries name it (e.g. `ingested/a.md` for an inbox note already moved)
    pending: bool = True  # needs after_store (an inbox note still in the inbox)
    replaces: bool = False  # an earlier version of the note is being replaced
    # `path` is the item's own file, whose stat and hash mark a result stale (a message of an
    # mbox is not: hashing the whole mailbox per message would read it once per message)
    own_file: bool = True


@dataclass
class Listing:
    items: list[Item] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)  # refused: named, left untouched
    ignored: list[str] = field(default_factory=list)  # not notes (other file kinds)
    skipped: dict[str, int] = field(default_factory=dict)  # files skipped, by gate (hidden ...)
    skipped_paths: list[tuple[str, str]] = field(default_factory=list)  # (shown path, gate)


class Source(Protocol):
    @property
    def root(self) -> Path:
        """The folder the source reads (the lock and state never go inside it)."""
        ...

    @property
    def origin(self) -> str:
        """The payload field `origin` of its notes: "inbox", a NOTE_FOLDERS name, a playlist."""
        ...

    @property
    def complete(self) -> bool:
        """Every listing names everything it holds: a stored note missing from it is gone (and
        the mass-deletion guard checks the share gone before anything changes)."""
        ...

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

    # --- how sources differ (SourceDefaults: as a source of files has them) ----------------

    @property
    def domains(self) -> tuple[Domain, ...]:
        """The collections its items go to (kb.content.formats.domain_of sorts them): a source of
        files has prose and code, a video list prose only (no code pass is run for it)."""
        ...

    @property
    def deletion_cause(self) -> str:
        """The payload `deleted_cause` of a note soft-deleted because its item is gone."""
        ...

    @property
    def halts_on_bad_frontmatter(self) -> bool:
        """Frontmatter that is not YAML stops the whole run before anything is written (the
        inbox: after_store would move the note away) rather than failing that note alone."""
        ...

    @property
    def local_listing(self) -> bool:
        """Its listing only reads local files: the mass-deletion guard lists a complete source so
        before any source changes anything. A remote one (a playlist: quota, captions fetched)
        is listed in its own turn and guarded by its own sync."""
        ...

    def refreshed_fields(self) -> dict[str, dict[str, object]]:
        """{note: payload fields} the last listing read again, set on the stored points of the
        notes not rewritten this run (a video's view count: no part of its fingerprint)."""
        ...

    def too_many_gone(self, gone: int, live: int) -> str:
        """For the mass-deletion guard of a complete source: what is gone from where, and what
        to look at first (the guard adds the limit and how to confirm)."""
        ...


class SourceDefaults:
    """The hooks of `Source` as a source of files has them; a source subclasses this and
    overrides what differs (kb.sources.youtube.playlist: prose only, `playlist_removed`, view
    counts refreshed, a remote listing)."""

    domains: ClassVar[tuple[Domain, ...]] = (PROSE, CODE)
    deletion_cause: ClassVar[str] = FILE_DELETED
    halts_on_bad_frontmatter: ClassVar[bool] = False
    local_listing: ClassVar[bool] = True

    def refreshed_fields(self) -> dict[str, dict[str, object]]:
        return {}
