"""Finding note files under a folder: what the inbox and in-place folders list, through the same
gates, cheapest first: hidden files and folders, editor swap and backup files, files git would
not track (an in-place folder that is a git work tree), secrets and keys, other file kinds (not
in INDEX_EXTENSIONS), then links and anything that is not a regular file. The size cap and the
binary and UTF-8 checks come when a note is read (kb.content.notes, kb.content.formats).

Each gate is one function (`folder_gate`, `file_gate`, `file_problem`): `discover` runs them
over a walk, `listed_now` over one file as it is now, before kb.search.read returns its text.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from kb.content.formats import DEFAULT_EXTENSIONS, is_secret
from kb.sources.base import Failure

# the inbox's folder of stored notes (kb.sources.inbox): never listed as waiting
INGESTED = "ingested"

# what editors leave beside a note while saving it: never a note
EDITOR_FILES = ("*.swp", "*~", ".#*", "*.save", "*.tmp", "*.part")
HIDDEN = "hidden"
EDITOR = "editor swap or backup file"
UNTRACKED = "not tracked by git (.gitignore)"
SECRET = "secret or key file (never indexed)"
OTHER_KIND = "a file kind not indexed (INDEX_EXTENSIONS)"
SYMLINKED_FOLDER = "symlinked folder (not followed)"
BAD_NAME = "file name is not valid UTF-8; rename it"
GONE = "the file is gone"
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


def git_files(folder: Path, path: str | None = None) -> set[str] | None:
    """The files git would track in `folder` (tracked, plus untracked ones not ignored), as POSIX
    paths relative to it; None when it is not in a git work tree or git is missing. `path`: only
    that file is asked about (a set holding it, or an empty one)."""
    only = ["--", path] if path is not None else []
    try:
        done = subprocess.run(
            ["git", "--literal-pathspecs", "-C", str(folder), "ls-files", "-z", "-co",
             "--exclude-standard", *only],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return {os.fsdecode(name) for name in done.stdout.split(b"\0") if name}


def folder_gate(name: str, rel: str, kept_dirs: set[str] | None) -> str | None:
    """The gate that leaves the folder `rel` (named `name`) unwalked, or None."""
    if name.startswith("."):
        return HIDDEN
    if kept_dirs is not None and rel not in kept_dirs:
        return UNTRACKED
    return None


def file_gate(
    name: str, rel: str, tracked: set[str] | None, suffixes: tuple[str, ...]
) -> str | None:
    """The gate that skips the file `rel` (named `name`), OTHER_KIND for a file of a kind not
    indexed, or None: one that is listed if it is a regular file (file_problem)."""
    if name.startswith("."):
        return HIDDEN
    if is_editor_file(name):
        return EDITOR
    if tracked is not None and rel not in tracked:
        return UNTRACKED
    if is_secret(name):
        return SECRET
    if not is_note_name(name, suffixes):
        return OTHER_KIND
    return None


def file_problem(path: Path, rel: str, real_root: Path) -> str | None:
    """Why the file at `path` is refused (a link, not a regular file, a name that is not
    UTF-8), GONE when it is not there, or None."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return BAD_NAME
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return GONE
    if stat.S_ISLNK(mode):
        target = Path(os.path.realpath(path))
        if not target.exists():
            return "broken symlink"
        if not target.is_relative_to(real_root):
            return "symlink pointing outside the notes folder (not followed)"
        return "symlink (not followed; its target is ingested on its own)"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    return None


def _kept_dirs(tracked: set[str] | None) -> set[str] | None:
    """With `tracked`: the folders holding tracked files (no other folder is walked)."""
    if tracked is None:
        return None
    return {p.rsplit("/", n)[0] for p in tracked for n in range(1, p.count("/") + 1)}


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
    kept_dirs = _kept_dirs(tracked)
    real_root = notes_root.resolve()
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        if leave_out is not None and here == top and leave_out in dirnames:
            dirnames.remove(leave_out)
        walked = []
        for name in sorted(dirnames):
            path = here / name
            rel = path.relative_to(top).as_posix()
            gate = folder_gate(name, rel, kept_dirs)
            if gate is not None:
                found.skip(f"{rel}/", gate)
            elif path.is_symlink():
                found.failed.append(Failure(rel, SYMLINKED_FOLDER))
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
            gate = file_gate(name, rel, tracked, suffixes)
            if gate == OTHER_KIND:
                found.ignored.append(rel)
            elif gate is not None:
                found.skip(rel, gate)
            elif (problem := file_problem(path, rel, real_root)) == GONE:
                continue  # removed while we were looking
            elif problem is not None:
                shown = rel if problem != BAD_NAME else repr(rel)
                found.failed.append(Failure(shown, problem))
            else:
                found.files.append((path, rel))
    return found


def listed_now(
    top: Path,
    rel: str,
    notes_root: Path,
    *,
    tracked: set[str] | None = None,
    suffixes: tuple[str, ...] = DEFAULT_SUFFIXES,
) -> str | None:
    """Why `discover(top, notes_root, tracked=..., suffixes=...)` would not list the file `rel`
    now (the gate of a folder on its way or of the file itself, or the file's problem), or None
    when it would: the same gates, on one file (kb.search.read checks a file so before reading
    it)."""
    parts = rel.split("/")
    kept_dirs = _kept_dirs(tracked)
    here = top
    for depth, name in enumerate(parts[:-1], start=1):
        here = here / name
        gate = folder_gate(name, "/".join(parts[:depth]), kept_dirs)
        if gate is not None:
            return f"in a folder skipped ({gate})"
        if here.is_symlink():
            return SYMLINKED_FOLDER
        if not here.is_dir():
            return GONE
    gate = file_gate(parts[-1], rel, tracked, suffixes)
    if gate is not None:
        return gate
    return file_problem(top / rel, rel, notes_root.resolve())
