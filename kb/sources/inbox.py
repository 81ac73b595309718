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
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kb.notes import NOTE_SUFFIXES, Note, read_note
from kb.sources.base import Failure, Item, Listing

INGESTED = "ingested"
MOVE_THREADS = 16  # notes moved side by side: enough for the journal to commit them as one


class InboxSource:
    """NOTES_DIR as an inbox (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ingested = root / INGESTED
        self._emptied: set[Path] = set()  # inbox folders notes were moved out of

    def listing(self, *, everything: bool) -> Listing:
        inbox, failed, ignored = discover(self.root, self.root, skip_ingested=True)
        items: list[Item] = []
        stored: list[tuple[Path, str]] = []
        if everything:
            stored, failed_stored, ignored_stored = discover(
                self.ingested, self.root, skip_ingested=False
            )
            failed += [Failure(f"{INGESTED}/{f.source}", f.reason) for f in failed_stored]
            ignored += [f"{INGESTED}/{name}" for name in ignored_stored]
            # a note both re-dropped and already ingested: only the new version is read
            in_inbox = {source for _, source in inbox}
            items += [
                Item(source, path, f"{INGESTED}/{source}", pending=False)
                for path, source in stored
                if source not in in_inbox
            ]
        for path, source in inbox:
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
        return Listing(items, failed, ignored)

    def read(self, item: Item, *, max_bytes: int) -> Note:
        return read_note(item.path, item.source, max_bytes=max_bytes)

    def holds(self, source: str) -> bool:
        return os.path.lexists(self.ingested / source) or os.path.lexists(self.root / source)

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


# --- discovery ------------------------------------------------------------------------


def _is_note_name(name: str) -> bool:
    return name.lower().endswith(NOTE_SUFFIXES)


def discover(
    top: Path, notes_root: Path, *, skip_ingested: bool
) -> tuple[list[tuple[Path, str]], list[Failure], list[str]]:
    """Note files under `top` as (path, source) pairs, plus files refused and files ignored.

    Sources are POSIX paths relative to `top` (the inbox, or ingested/ when rebuilding). Hidden
    files and folders are skipped. Links are never followed: a note must be a regular file.
    """
    found: list[tuple[Path, str]] = []
    failed: list[Failure] = []
    ignored: list[str] = []
    real_root = notes_root.resolve()
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        if skip_ingested and here == top and INGESTED in dirnames:
            dirnames.remove(INGESTED)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in dirnames:
            path = here / name
            rel = path.relative_to(top).as_posix()
            if path.is_symlink():
                failed.append(Failure(rel, "symlinked folder (not followed)"))
            elif _is_note_name(name):
                failed.append(Failure(rel, "a folder, not a note file (files inside it are read)"))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            path = here / name
            rel = path.relative_to(top).as_posix()
            if not _is_note_name(name):
                ignored.append(rel)
                continue
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                failed.append(Failure(repr(rel), "file name is not valid UTF-8; rename it"))
                continue
            try:
                mode = path.lstat().st_mode
            except FileNotFoundError:
                continue  # removed while we were looking
            if stat.S_ISLNK(mode):
                target = Path(os.path.realpath(path))
                if not target.exists():
                    reason = "broken symlink"
                elif not target.is_relative_to(real_root):
                    reason = "symlink pointing outside the notes folder (not followed)"
                else:
                    reason = "symlink (not followed; its target is ingested on its own)"
                failed.append(Failure(rel, reason))
            elif not stat.S_ISREG(mode):
                failed.append(Failure(rel, "not a regular file"))
            else:
                found.append((path, rel))
    return found, failed, ignored


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


def _makedirs_durably(path: Path) -> None:
    missing: list[Path] = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir()
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
            _makedirs_durably(folder)
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
