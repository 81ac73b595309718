"""The notes folder's side of ingest: finding note files and moving them into ingested/.

Files are never copied, altered or silently overwritten. A stored note is moved by hard link +
unlink (or a rename where hard links are not supported); directories are fsynced so the move
survives a power cut; an interrupted move (both names present) is finished on the next run.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kb.notes import NOTE_SUFFIXES
from kb.progress import Failure

INGESTED = "ingested"


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


class Mover:
    """Moves stored notes into ingested/ without copying and without silent overwrites.

    A new name is made with a hard link (fails if `dest` exists) and the inbox name removed.
    An existing `dest` is an earlier version of the same note: it is replaced deliberately, by
    an atomic rename. Each note's bytes are fsynced before it is moved; the folders it touched
    are fsynced by `sync()`, once per group of notes rather than twice per note. A power cut
    before `sync()` can only undo whole moves (the journal keeps them in order), leaving those
    notes in the inbox for the next run, whose writes are already in Qdrant.
    """

    def __init__(self) -> None:
        self._dirty: set[Path] = set()  # folders with entries added or removed since sync()

    def move(self, src: Path, dest: Path) -> None:
        _makedirs_durably(dest.parent)
        fd = os.open(src, os.O_RDONLY)
        try:
            os.fsync(fd)  # the note's bytes are on disk before any new name points at them
        finally:
            os.close(fd)
        self._dirty.update((src.parent, dest.parent))
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
            # the ingest lock, so no other ingest can race us)
            if os.path.lexists(dest):
                raise
            os.rename(src, dest)
        else:
            os.unlink(src)

    def sync(self) -> None:
        """Make the moves so far survive a power cut."""
        for folder in sorted(self._dirty):
            _fsync_dir(folder)
        self._dirty.clear()
