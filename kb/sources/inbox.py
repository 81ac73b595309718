"""The inbox source: notes dropped into NOTES_DIR move to NOTES_DIR/ingested/ once stored.

So the inbox holds only what has not been ingested yet. A note re-dropped under the same path
replaces its earlier version in ingested/; a full build reads ingested/ too. Files are never
copied, altered or silently overwritten. A stored note is moved by hard link + unlink (or a
rename where hard links are not supported); directories are fsynced so the move survives a
power cut; an interrupted move (both names present) is finished on the next run. Folders that
the run emptied are removed from the inbox (never a folder that still holds anything).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kb.content.notes import Note, NoteError, read_note
from kb.core.errors import IngestError, NoteNotFound
from kb.core.properties import DEFAULTS as DEFAULT_PROPERTIES
from kb.core.properties import Properties
from kb.core.schema import INBOX, ORIGIN
from kb.core.settings import Settings
from kb.core.state import State
from kb.sources.base import Failure, Item, Listing, Source, SourceDefaults
from kb.sources.files import DEFAULT_SUFFIXES, INGESTED, discover, listed_now
from kb.sources.folder import folders
from kb.sources.kind import Kind, Payload, ReadConfig, Shown, checked_name, file_text

MOVE_THREADS = 16  # notes moved side by side: enough for the journal to commit them as one


class InboxSource(SourceDefaults):
    """NOTES_DIR as an inbox (see the module docstring)."""

    origin = INBOX
    complete = False  # a run lists only what waits in the inbox (everything: a full build)
    halts_on_bad_frontmatter = True  # its notes would move into ingested/ unread otherwise

    def __init__(
        self,
        root: Path,
        *,
        reserved: Collection[str] = (),
        suffixes: tuple[str, ...] = DEFAULT_SUFFIXES,
        properties: Properties = DEFAULT_PROPERTIES,
    ) -> None:
        self.root = root
        self.suffixes = suffixes  # the file kinds listed (INDEX_EXTENSIONS)
        self.properties = properties  # which frontmatter keys fill which field (NOTE_PROPERTIES)
        self.reserved = frozenset(reserved)  # NOTE_FOLDERS names: no inbox note may start so
        self.ingested = root / INGESTED
        self._emptied: set[Path] = set()  # inbox folders notes were moved out of

    def listing(self, *, everything: bool) -> Listing:
        found = discover(self.root, self.root, leave_out=INGESTED, suffixes=self.suffixes)
        inbox, failed, ignored, skipped = found.files, found.failed, found.ignored, found.skipped
        skipped_paths = list(found.skipped_paths)
        items: list[Item] = []
        stored: list[tuple[Path, str]] = []
        if everything:
            done = discover(self.ingested, self.root, suffixes=self.suffixes)
            stored = done.files
            failed += [Failure(f"{INGESTED}/{f.source}", f.reason) for f in done.failed]
            ignored += [f"{INGESTED}/{name}" for name in done.ignored]
            skipped.update(done.skipped)
            skipped_paths += [(f"{INGESTED}/{rel}", gate) for rel, gate in done.skipped_paths]
            # a note both re-dropped and already ingested: only the new version is read
            in_inbox = {source for _, source in inbox}
            items += [
                Item(source, path, f"{INGESTED}/{source}", pending=False)
                for path, source in stored
                if source not in in_inbox
            ]
        for path, source in inbox:
            if source.split("/", 1)[0] in self.reserved:
                top = source.split("/", 1)[0]
                failed.append(Failure(source, f"{top} is a NOTE_FOLDERS name; rename the folder"))
                continue
            dest = self.ingested / source
            replaces = False
            if os.path.lexists(dest):
                if not dest.is_file() or dest.is_symlink():
                    failed.append(
                        Failure(source, f"{INGESTED}/{source} exists and is not a file; rename one")
                    )
                    continue
                replaces = not os.path.samefile(path, dest)
            items.append(Item(source, path, source, pending=True, replaces=replaces))
        return Listing(items, failed, ignored, dict(skipped), skipped_paths)

    def read(self, item: Item, *, max_bytes: int) -> Note:
        return read_note(item.path, item.source, max_bytes=max_bytes, properties=self.properties)

    def file_now(self, source: str) -> Path:
        """The file of the stored note `source` in ingested/ if a full build's listing would
        hold it now (the same gates, on that file alone); NoteError with the reason otherwise."""
        problem = listed_now(self.ingested, source, self.root, suffixes=self.suffixes)
        if problem is not None:
            raise NoteError(source, problem)
        return self.ingested / source

    def holds(self, source: str) -> bool:
        return os.path.lexists(self.ingested / source) or os.path.lexists(self.root / source)

    def too_many_gone(self, gone: int, live: int) -> str:
        return f"NOTES_DIR {self.root}: {gone} of its {live} notes are gone from {INGESTED}/"

    def after_store(self, items: Sequence[Item]) -> list[OSError | None]:
        moving = [i for i in items if i.pending]
        errors = iter(move_all([(i.path, self.ingested / i.source) for i in moving]))
        self._emptied.update(i.path.parent for i in moving)
        return [next(errors) if i.pending else None for i in items]

    def finish(self) -> None:
        """Remove the inbox folders this run emptied, deepest first (rmdir refuses a folder
        that holds anything, hidden files included, so nothing of the user's is touched)."""
        for folder in sorted(self._emptied, key=lambda p: len(p.parts), reverse=True):
            while folder != self.root and folder.is_relative_to(self.root):
                try:
                    folder.rmdir()
                except OSError:
                    break
                folder = folder.parent
        self._emptied.clear()


class Inbox(Kind):
    """NOTES_DIR as the inbox: its notes' origin is "inbox" (or none: written before origins)."""

    name = INBOX
    order = 0
    setting = "NOTES_DIR"

    def build(self, settings: Settings, state: State) -> list[Source]:
        """The inbox; no note of it may start with a NOTE_FOLDERS name (checked there:
        ConfigError naming the folder). IngestError for a NOTES_DIR that is not a folder."""
        if not settings.NOTES_DIR.is_dir():
            raise IngestError(f"NOTES_DIR {settings.NOTES_DIR} is not a folder")
        return [
            InboxSource(
                settings.NOTES_DIR,
                reserved=[f.name for f in folders(settings)],
                suffixes=settings.index_extensions,
                properties=settings.note_properties,
            )
        ]

    def owns(self, payload: Payload) -> bool:
        return payload.get(ORIGIN) in (None, "", INBOX)

    def text(self, config: ReadConfig, source: str, payloads: Sequence[Payload]) -> str:
        checked_name(source)
        try:
            path = InboxSource(config.notes_dir, suffixes=config.suffixes).file_now(source)
        except NoteError as exc:
            raise NoteNotFound(f"{source}: not read: {exc.reason}") from None
        return file_text(config, source, path)

    def files(self, settings: Settings) -> dict[str, Path]:
        return {INBOX: settings.NOTES_DIR / INGESTED}

    def places(self, settings: Settings) -> dict[str, Path]:
        return {INBOX: settings.NOTES_DIR}

    def shown(self, settings: Settings) -> list[Shown]:
        root = settings.NOTES_DIR
        problem = None
        if not root.is_dir():
            problem = f"NOTES_DIR {root} is not a folder here (not mounted, or on another machine)"
        return [Shown(INBOX, self.setting, str(root), str(root), problem)]

    def waiting(
        self, settings: Settings, shown: Shown, live: Callable[[], set[str]], since: float | None
    ) -> tuple[int | None, int]:
        """Every note file still in the inbox (ingesting moves them out)."""
        root = settings.NOTES_DIR
        return len(discover(root, root, leave_out=INGESTED).files), 0


KIND = Inbox()


# --- moving ---------------------------------------------------------------------------


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs_durably(path: Path) -> None:
    """Make `path` and its missing parents, each as open as the folder above it, and sync each
    parent's entry (a crash leaves no half-made folder behind)."""
    missing: list[Path] = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir()
        # the user's folder, not ours: as open as the one it sits in, whatever our umask
        # (kb.core.state)
        os.chmod(folder, stat.S_IMODE(folder.parent.stat().st_mode))
        _fsync_dir(folder.parent)


def move_all(moves: Sequence[tuple[Path, Path]]) -> list[OSError | None]:
    """Move stored notes (inbox path, ingested/ path) into ingested/: never copied, never
    silently overwritten. Returns, in order, None for each note moved or the error that left it
    in the inbox.

    A new name is made with a hard link (fails if the destination exists) and the inbox name
    removed. An existing destination is an earlier version of the same note: it is replaced
    deliberately, by an atomic rename, and only once the new bytes are on disk (else a power
    cut could leave an empty file where the earlier version was). Notes are moved side by side:
    the filesystem journal then commits their fsyncs and renames together, 20-30x faster than
    one by one. The folders touched are fsynced once at the end; a power cut before that can
    only undo whole moves (the journal keeps them in order), leaving those notes in the inbox
    for the next run, whose points are already in Qdrant.
    """
    if not moves:
        return []
    unmade: dict[Path, OSError] = {}  # folders that could not be made: their notes stay put
    for folder in sorted({dest.parent for _, dest in moves}):
        try:
            makedirs_durably(folder)
        except OSError as exc:
            unmade[folder] = exc

    def move_one(move: tuple[Path, Path]) -> OSError | None:
        if move[1].parent in unmade:
            return unmade[move[1].parent]
        try:
            _move(*move)
        except OSError as exc:
            return exc
        return None

    with ThreadPoolExecutor(max_workers=min(MOVE_THREADS, len(moves))) as pool:
        errors = list(pool.map(move_one, moves))
    for folder in sorted({p.parent for pair in moves for p in pair} - set(unmade)):
        _fsync_dir(folder)
    return errors


def _move(src: Path, dest: Path) -> None:
    _fsync_file(src)  # the note's bytes are on disk before any new name points at them
    if os.path.lexists(dest):
        if not dest.is_file() or dest.is_symlink():
            raise OSError(f"{dest} exists and is not a file")
        if os.path.samefile(src, dest):
            os.unlink(src)  # an earlier move stopped between link and unlink
        else:
            os.replace(src, dest)  # a re-dropped note replaces its earlier version
        return
    try:
        os.link(src, dest)
    except FileExistsError:
        raise OSError(f"{dest} appeared meanwhile; not overwritten") from None
    except OSError:
        # filesystems without hard links: rename, after checking nothing is there (we hold
        # the ingest lock, so no other ingest can race us, and each note has its own dest)
        if os.path.lexists(dest):
            raise
        os.rename(src, dest)
    else:
        os.unlink(src)
