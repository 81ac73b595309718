"""Finding note files under a folder: what the inbox and in-place folders list, through the same
gates, cheapest first: hidden files and folders, editor swap and backup files, files git would
not track (an in-place folder that is a git work tree), secrets and keys, other file kinds (not
in INDEX_EXTENSIONS), then links and anything that is not a regular file. The size cap and the
binary and UTF-8 checks come when a note is read (kb.notes, kb.formats).
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from kb.formats import DEFAULT_EXTENSIONS, is_secret
from kb.sources.base import Failure

# what editors leave beside a note while saving it: never a note
EDITOR_FILES = ("*.swp", "*~", ".#*", "*.save", "*.tmp", "*.part")
HIDDEN = "hidden"
EDITOR = "editor swap or backup file"
UNTRACKED = "not tracked by git (.gitignore)"
SECRET = "secret or key file (never indexed)"
DEFAULT_SUFFIXES = tuple(DEFAULT_EXTENSIONS.split(","))
GIT_TIMEOUT_S = 60


@dataclass
class Found:
    files: list[tuple[Path, str]] = field(default_factory=list)  # (path, POSIX path under top)
    failed: list[Failure] = field(default_factory=list)  # refused, with the reason
    ignored: list[str] = field(default_factory=list)  # other file kinds
    skipped: Counter[str] = field(default_factory=Counter)  # files and folders skipped, by gate
    skipped_paths: list[tuple[str, str]] = field(default_factory=list)  # (path, gate), for -v

    def skip(self, rel: str, gate: str) -> None:
        self.skipped[gate] += 1
        self.skipped_paths.append((rel, gate))


def is_note_name(name: str, suffixes: tuple[str, ...] = DEFAULT_SUFFIXES) -> bool:
    return name.lower().endswith(suffixes)


def is_editor_file(name: str) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in EDITOR_FILES)


def git_files(folder: Path) -> set[str] | None:
    """The files git would track in `folder` (tracked, plus untracked ones not ignored), as POSIX
    paths relative to it; None when it is not in a git work tree or git is missing."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "ls-files", "-z", "-co", "--exclude-standard"],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return {os.fsdecode(name) for name in done.stdout.split(b"\0") if name}


def discover(
    top: Path,
    notes_root: Path,
    *,
    leave_out: str | None = None,
    tracked: set[str] | None = None,
    suffixes: tuple[str, ...] = DEFAULT_SUFFIXES,
) -> Found:
    """Note files under `top` as (path, source) pairs, plus what was refused, ignored, skipped.

    Sources are POSIX paths relative to `top`. `leave_out`: a folder right under `top` not
    walked (the inbox's ingested/). `tracked`: only these files (relative to `top`) are listed
    (git_files). `suffixes`: the file kinds listed (INDEX_EXTENSIONS); secrets and keys never
    are. Links are never followed: a note must be a regular file.
    """
    found = Found()
    kept_dirs = None  # with `tracked`: the folders holding tracked files (others are not walked)
    if tracked is not None:
        kept_dirs = {p.rsplit("/", n)[0] for p in tracked for n in range(1, p.count("/") + 1)}
    real_root = notes_root.resolve()
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        if leave_out is not None and here == top and leave_out in dirnames:
            dirnames.remove(leave_out)
        walked = []
        for name in sorted(dirnames):
            path = here / name
            rel = path.relative_to(top).as_posix()
            if name.startswith("."):
                found.skip(f"{rel}/", HIDDEN)
            elif kept_dirs is not None and rel not in kept_dirs:
                found.skip(f"{rel}/", UNTRACKED)
            elif path.is_symlink():
                found.failed.append(Failure(rel, "symlinked folder (not followed)"))
            else:
                if is_note_name(name, suffixes):
                    found.failed.append(
                        Failure(rel, "a folder, not a note file (files inside it are read)")
                    )
                walked.append(name)
        dirnames[:] = walked
        for name in sorted(filenames):
            path = here / name
            rel = path.relative_to(top).as_posix()
            if name.startswith("."):
                found.skip(rel, HIDDEN)
            elif is_editor_file(name):
                found.skip(rel, EDITOR)
            elif tracked is not None and rel not in tracked:
                found.skip(rel, UNTRACKED)
            elif is_secret(name):
                found.skip(rel, SECRET)
            elif not is_note_name(name, suffixes):
                found.ignored.append(rel)
            else:
                _check_file(path, rel, real_root, found)
    return found


def _check_file(path: Path, rel: str, real_root: Path, found: Found) -> None:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        found.failed.append(Failure(repr(rel), "file name is not valid UTF-8; rename it"))
        return
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return  # removed while we were looking
    if stat.S_ISLNK(mode):
        target = Path(os.path.realpath(path))
        if not target.exists():
            reason = "broken symlink"
        elif not target.is_relative_to(real_root):
            reason = "symlink pointing outside the notes folder (not followed)"
        else:
            reason = "symlink (not followed; its target is ingested on its own)"
        found.failed.append(Failure(rel, reason))
    elif not stat.S_ISREG(mode):
        found.failed.append(Failure(rel, "not a regular file"))
    else:
        found.files.append((path, rel))
