"""A kind of source as the rest of the house sees it: how its sources are built from the
settings, which stored items are its own, how such an item is read back (`read_note`, the
resources) and where its files are (staleness, status, the watcher).

Each kind declares one `KIND = ...` in its own module (kb.sources.inbox, kb.sources.folder,
kb.sources.youtube, kb.sources.web, kb.sources.mail); kb.sources.registry finds them. kb.app,
kb.search and the MCP server iterate the registry and import no kind (import-linter checks it),
so a new kind is one module, one guide page and one test file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from kb.content.notes import NoteError, is_private, read_note
from kb.content.obsidian import without_comments
from kb.core.errors import ConfigError, NoteNotFound
from kb.core.properties import Properties
from kb.core.schema import ORIGIN, TRANSCRIPT
from kb.core.settings import KindSettings, Settings
from kb.core.state import State
from kb.sources.base import Source

Payload = Mapping[str, Any]


@dataclass(frozen=True)
class ReadConfig:
    """The settings reading reads, as plain values (kb.app.backend.read_config builds it): where
    the indexed files are and how ingest reads them."""

    notes_dir: Path  # NOTES_DIR: the inbox, whose stored notes are in ingested/
    note_folders: str  # NOTE_FOLDERS as written (checked when a folder's note is read)
    folders_git: bool  # NOTE_FOLDERS_GIT
    suffixes: tuple[str, ...]  # INDEX_EXTENSIONS
    max_bytes: int  # NOTE_MAX_BYTES
    private_tags: frozenset[str]  # PRIVATE_TAGS, normalised
    properties: Properties  # NOTE_PROPERTIES: which keys fill which field


@dataclass(frozen=True)
class Shown:
    """One configured source as `status` lists it (Kind.shown): read from the settings and a
    look at whether its paths exist, nothing more."""

    origin: str  # its items' origin: the row's name (the index counts notes by it)
    setting: str  # the setting that configures it (NOTES_DIR, NOTE_FOLDERS, MAIL ...)
    path: str  # what it reads, as this process sees it (a folder, mailboxes, a playlist's link)
    logged: str  # its source's root as the run log names it (kb.ingest.run)
    problem: str | None = None  # why it cannot be read from here (a drive not mounted)


class Kind:
    """One kind of source. Subclasses set the class attributes and override what differs; the
    defaults are those of a kind whose items have no file of the user's (read back from what
    the index stored)."""

    name: ClassVar[str]  # as the docs and logs name it
    order: ClassVar[int]  # when its sources sync in a run (the inbox first)
    # its listing spends a remote quota (a playlist): not built for a watcher's batch
    remote: ClassVar[bool] = False
    # its own settings (declared in its module; Settings.of reads them), None: it reads Settings'
    settings_model: ClassVar[type[KindSettings] | None] = None
    # the payload fields its items add to a note's (ChunkRecord's extra fields)
    fields: ClassVar[tuple[str, ...]] = ()
    # the first part of every item's `source` ("youtube", "web"): no folder may take it
    prefix: ClassVar[str | None] = None
    # what why_not_found says of a name under `prefix` that the index does not hold
    unseen: ClassVar[str] = ""
    # owns what no other kind owns (a NOTE_FOLDERS folder: its origin is any name the user chose)
    fallback: ClassVar[bool] = False
    # the setting that configures its sources, as `status` names it (MAIL)
    setting: ClassVar[str] = ""

    def build(self, settings: Settings, state: State) -> list[Source]:
        """Its sources as the settings configure them (none when it is not configured);
        ConfigError naming the setting otherwise."""
        raise NotImplementedError

    def owns(self, payload: Payload) -> bool:
        """Whether a stored item (its first chunk's payload) is one of this kind's: by default,
        one whose origin is the kind's `prefix`."""
        return self.prefix is not None and payload.get(ORIGIN) == self.prefix

    def text(self, config: ReadConfig, source: str, payloads: Sequence[Payload]) -> str:
        """The stored item's readable text as `read_note` returns it (before redaction and
        invisible characters, which the reader applies); NoteNotFound when it may not be read."""
        return stored_text(payloads)

    def files(self, settings: Settings) -> dict[str, Path]:
        """Where its items' files are, by origin (kb.search.fresh tells a stale result by them);
        none for a kind without files of the user's."""
        return {}

    def places(self, settings: Settings) -> dict[str, Path]:
        """The folders its sources list, by origin (the watcher, the dashboard's Sync), checked:
        ConfigError naming the setting for one that is wrong."""
        return {}

    def close(self, sources: Sequence[Source]) -> None:
        """The run is over: close what `build` opened (clients)."""

    def shown(self, settings: Settings) -> list[Shown]:
        """Its configured sources as `status` lists them (none when it is not configured),
        cheaply: nothing is opened or listed; ConfigError when its setting does not parse
        (status shows it as the kind's row). The default is that of a kind whose `setting` is
        comma-separated paths read by one source of origin `name`, logged under the first
        path's folder (mail, Evernote)."""
        own = settings.of(self.settings_model) if self.settings_model else settings
        paths = setting_paths(str(getattr(own, self.setting)))
        if not paths:
            return []
        missing = next((p for p in paths if not p.exists()), None)
        problem = None
        if missing:
            problem = f"{self.setting}: {missing} does not exist (a drive unmounted?)"
        where = ", ".join(map(str, paths))
        return [Shown(self.name, self.setting, where, str(paths[0].parent), problem)]

    def waiting(
        self, settings: Settings, shown: Shown, live: Callable[[], set[str]], since: float | None
    ) -> tuple[int | None, int]:
        """(items waiting: new or changed since its last sync, which started at `since`; stored
        items gone from it, which `live()` names) for one of its sources that can be read; (None,
        0): not counted, as for a kind with no folder of files to walk cheaply (a mailbox)."""
        return None, 0


def setting_paths(value: str) -> list[Path]:
    """A setting's comma-separated paths (`~` expanded), in order, without repeats."""
    return list(dict.fromkeys(Path(e.strip()).expanduser() for e in value.split(",") if e.strip()))


def existing_paths(setting: str, value: str) -> list[Path]:
    """`setting_paths`, each one there: ConfigError naming the setting and the first missing."""
    paths = setting_paths(value)
    for path in paths:
        if not path.exists():
            raise ConfigError(f"{setting}: {path} does not exist (a drive unmounted?)")
    return paths


def stored_text(payloads: Sequence[Payload]) -> str:
    """An item without a file (a video, a bookmarked page, a message): its text is what the
    index stored, in chunk order (title and link first; a caption passage led by its moment,
    `[12:34]`)."""
    first = payloads[0]
    lines = [str(first.get("title") or first.get("source")), str(first.get("url") or ""), ""]
    for payload in sorted(payloads, key=lambda p: int(p.get("chunk_index") or 0)):
        moment = (
            f"[{payload.get('locator')}] " if payload.get("heading_path") == [TRANSCRIPT] else ""
        )
        lines += [moment + str(payload.get("text") or ""), ""]
    return "\n".join(lines)


def checked_name(source: str) -> PurePosixPath:
    """A stored item's name as a relative POSIX path; NoteNotFound for anything else."""
    path = PurePosixPath(source)
    if not path.parts or source.startswith("/") or ".." in path.parts or "\\" in source:
        raise NoteNotFound(f"{source!r} is not a note's name")
    return path


def file_text(config: ReadConfig, source: str, path: Path) -> str:
    """The readable text of an indexed item's file `path`, as ingest would read it now;
    NoteNotFound when ingest would not index it (unreadable, private now)."""
    try:
        note = read_note(path, source, max_bytes=config.max_bytes, properties=config.properties)
    except NoteError as exc:
        raise NoteNotFound(f"{source}: not read: {exc.reason}") from None
    except OSError as exc:
        raise NoteNotFound(f"{source}: not read: cannot read it ({exc.strerror})") from None
    if is_private(note, config.private_tags):
        raise NoteNotFound(
            f"{source}: not read: it is private now (private: true or a PRIVATE_TAGS tag)"
        )
    return without_comments(note.text, note.edits)  # as the index holds it
