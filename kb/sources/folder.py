"""A folder indexed in place (NOTE_FOLDERS): an Obsidian vault, a folder of Markdown, a git
repository of notes. Its files are only ever read: never moved, written or locked.

Each note's `source` is the folder's name and its path in it (`vault/projects/kimchi.md`), and
every listing names everything the folder holds, so each run is a full sync of that folder
(kb.ingest.plan): a file gone from it is soft-deleted. In a git work tree only what git would track
is
listed (NOTE_FOLDERS_GIT). Discovery and its gates are kb.sources.files, shared with the inbox.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kb.content.notes import Note, NoteError, read_note
from kb.core.errors import ConfigError, NoteNotFound
from kb.core.properties import DEFAULTS as DEFAULT_PROPERTIES
from kb.core.properties import Properties
from kb.core.schema import INBOX
from kb.core.settings import Settings, from_root
from kb.core.state import State
from kb.sources.base import Failure, Item, Listing, Source, SourceDefaults
from kb.sources.files import DEFAULT_SUFFIXES, INGESTED, discover, git_files, listed_now
from kb.sources.kind import Kind, Payload, ReadConfig, Shown, checked_name, file_text

# names a folder may not take: another source's (the inbox's, its ingested/ folder)
RESERVED = frozenset({INBOX, INGESTED})


@dataclass
class FolderSource(SourceDefaults):
    """One NOTE_FOLDERS folder (see the module docstring)."""

    name: str
    root: Path
    git: bool = True  # list only what git would track when the folder is a git work tree
    suffixes: tuple[str, ...] = DEFAULT_SUFFIXES  # the file kinds listed (INDEX_EXTENSIONS)
    # which frontmatter keys fill which field (NOTE_PROPERTIES)
    properties: Properties = field(default_factory=lambda: dict(DEFAULT_PROPERTIES))
    complete = True
    # what the last listing named, read or not: a stored note still listed is never gone
    _listed: set[str] = field(default_factory=set, repr=False, compare=False)

    @property
    def origin(self) -> str:
        return self.name

    def listing(self, *, everything: bool) -> Listing:
        tracked = git_files(self.root) if self.git else None
        found = discover(self.root, self.root, tracked=tracked, suffixes=self.suffixes)
        listing = Listing(
            [Item(f"{self.name}/{rel}", path, f"{self.name}/{rel}", pending=False)
             for path, rel in found.files],
            [Failure(f"{self.name}/{f.source}", f.reason) for f in found.failed],
            [f"{self.name}/{rel}" for rel in found.ignored],
            dict(found.skipped),
            [(f"{self.name}/{rel}", gate) for rel, gate in found.skipped_paths],
        )  # fmt: skip
        self._listed = {i.source for i in listing.items} | {f.source for f in listing.failed}
        return listing

    def read(self, item: Item, *, max_bytes: int) -> Note:
        return read_note(item.path, item.source, max_bytes=max_bytes, properties=self.properties)

    def file_now(self, source: str) -> Path:
        """The file of the note `source` if a listing would hold it now (the same gates, on that
        file alone); NoteError with the gate's reason otherwise."""
        rel = source.removeprefix(f"{self.name}/")
        tracked = git_files(self.root, rel) if self.git else None
        problem = listed_now(self.root, rel, self.root, tracked=tracked, suffixes=self.suffixes)
        if problem is not None:
            raise NoteError(source, problem)
        return self.root / rel

    def holds(self, source: str) -> bool:
        """A file the last listing named but that could not be read keeps its note; one the
        gates now leave out (hidden, git-ignored) is gone like a deleted one."""
        return source in self._listed

    def after_store(self, items: Sequence[Item]) -> list[OSError | None]:
        return [None] * len(items)  # in place: nothing is ever done to the files

    def finish(self) -> None:
        pass

    def too_many_gone(self, gone: int, live: int) -> str:
        return (
            f"NOTE_FOLDERS {self.name} ({self.root}): {gone} of its {live} notes are gone from "
            "the folder (an unmounted drive? another branch checked out?)"
        )


def claim_prefix(setting: str, prefix: str, items: str, note_folders: str) -> None:
    """ConfigError when a NOTE_FOLDERS folder is named `prefix`, the first part of the names of
    `setting`'s `items` ("pages", "messages"): the two would share their names."""
    if prefix in (name for name, _ in parse(note_folders)):
        raise ConfigError(
            f"{setting}: {items} are named {prefix}/..., and a NOTE_FOLDERS folder already uses "
            "that name: rename it"
        )


def parse(value: str) -> list[tuple[str, str]]:
    """NOTE_FOLDERS as (name, path) pairs, in order; a pair without `name=` is named by its
    folder. Only the syntax: `configured` checks the folders."""
    pairs = []
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, path = entry.partition("=")
        if not sep:
            name, path = "", entry
        path = path.strip()
        if not path:
            raise ConfigError(f"NOTE_FOLDERS: {entry!r} names no folder (use name=path)")
        pairs.append((name.strip() or Path(os.path.expanduser(path)).resolve().name, path))
    return pairs


def configured(
    notes_dir: Path,
    note_folders: str,
    *,
    git: bool = True,
    suffixes: tuple[str, ...] = DEFAULT_SUFFIXES,
    properties: Properties = DEFAULT_PROPERTIES,
) -> list[FolderSource]:
    """The folders `note_folders` (NOTE_FOLDERS) names, checked: each exists and is readable,
    names are unique and can collide with no other source's notes (the inbox `notes_dir`'s).
    `git` (NOTE_FOLDERS_GIT), `suffixes` (INDEX_EXTENSIONS) and `properties` (NOTE_PROPERTIES)
    go to each FolderSource.
    ConfigError naming the folder or name otherwise."""
    taken = _inbox_names(notes_dir)
    inbox = notes_dir.resolve()
    folders: list[FolderSource] = []
    for name, text in parse(note_folders):
        where = f"NOTE_FOLDERS: {name}={text}"
        if "/" in name or "\\" in name or name.startswith(".") or name in RESERVED:
            raise ConfigError(
                f"{where}: {name!r} cannot name a folder (no '/', no leading '.', "
                f"not {' or '.join(sorted(RESERVED))}); choose another name"
            )
        if name in taken:
            raise ConfigError(
                f"{where}: {notes_dir / name} exists in NOTES_DIR; the notes of both "
                "would share names: choose another name"
            )
        if any(f.name == name for f in folders):
            raise ConfigError(f"{where}: the name {name!r} is used twice; give each its own")
        path = from_root(Path(text))
        if not path.is_dir():
            raise ConfigError(f"{where}: {path} is not a folder (missing, or a drive unmounted?)")
        if not os.access(path, os.R_OK | os.X_OK):
            raise ConfigError(f"{where}: {path} is not readable")
        if path.is_relative_to(inbox) or inbox.is_relative_to(path):
            raise ConfigError(f"{where}: {path} overlaps NOTES_DIR {inbox}; keep them apart")
        folders.append(
            FolderSource(name, path, git=git, suffixes=suffixes, properties=dict(properties))
        )
    return folders


def _inbox_names(notes_dir: Path) -> set[str]:
    """The first path components the inbox's notes have, or will have (its top-level entries
    and those of ingested/)."""
    names: set[str] = set()
    for folder in (notes_dir, notes_dir / INGESTED):
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            names.update(e.name for e in entries if e.name != INGESTED)
    return names


def folders(settings: Settings) -> list[FolderSource]:
    """The NOTE_FOLDERS folders, checked (ConfigError naming the folder otherwise)."""
    return configured(
        settings.NOTES_DIR,
        settings.NOTE_FOLDERS,
        git=settings.NOTE_FOLDERS_GIT,
        suffixes=settings.index_extensions,
        properties=settings.note_properties,
    )


class Folders(Kind):
    """The NOTE_FOLDERS folders, indexed in place: every other origin is a folder's name."""

    name = "folders"
    order = 1
    fallback = True
    setting = "NOTE_FOLDERS"

    def build(self, settings: Settings, state: State) -> list[Source]:
        return list(folders(settings))

    def owns(self, payload: Payload) -> bool:
        return True

    def text(self, config: ReadConfig, source: str, payloads: Sequence[Payload]) -> str:
        parts = checked_name(source).parts
        origin = str(payloads[0].get("origin"))
        found = configured(
            config.notes_dir, config.note_folders, git=config.folders_git, suffixes=config.suffixes
        )
        by_name = {f.name: f for f in found}
        if origin not in by_name or parts[0] != origin:
            raise NoteNotFound(f"{source}: its folder {origin!r} is no longer in NOTE_FOLDERS")
        try:
            path = by_name[origin].file_now(source)
        except NoteError as exc:
            raise NoteNotFound(f"{source}: not read: {exc.reason}") from None
        return file_text(config, source, path)

    def files(self, settings: Settings) -> dict[str, Path]:
        """Every folder (none while NOTE_FOLDERS does not parse: `status` says why)."""
        try:
            return {name: from_root(Path(path)) for name, path in parse(settings.NOTE_FOLDERS)}
        except ConfigError:
            return {}

    def places(self, settings: Settings) -> dict[str, Path]:
        return {f.name: f.root for f in folders(settings)}

    def shown(self, settings: Settings) -> list[Shown]:
        rows = []
        for name, path in parse(settings.NOTE_FOLDERS):
            root = from_root(Path(path))
            problem = None
            if not root.is_dir():
                problem = (
                    f"NOTE_FOLDERS {name} {root} is not a folder here (not mounted, or on "
                    "another machine)"
                )
            rows.append(Shown(name, self.setting, str(root), str(root), problem))
        return rows

    def waiting(
        self, settings: Settings, shown: Shown, live: Callable[[], set[str]], since: float | None
    ) -> tuple[int | None, int]:
        """The files new since its last sync or modified after it started; the stored notes
        whose file is gone (its next sync soft-deletes them)."""
        root = Path(shown.path)
        tracked = git_files(root) if settings.NOTE_FOLDERS_GIT else None
        found = discover(root, root, tracked=tracked).files
        files = {f"{shown.origin}/{rel}": path for path, rel in found}
        stored = live()
        waiting = sum(1 for s, p in files.items() if s not in stored or _modified_after(p, since))
        return waiting, len(stored - files.keys())


def _modified_after(path: Path, since: float | None) -> bool:
    try:
        # the log keeps whole seconds: a file saved within the run's first second counts as
        # seen, not as waiting forever after
        return since is None or path.stat().st_mtime >= since + 1
    except OSError:
        return False  # gone meanwhile: the next look sees it


KIND = Folders()
