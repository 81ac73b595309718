"""Notion exports as a source (NOTION): the "Markdown & CSV" export, as Notion's zip or the
folder it unpacks to, each page one note named `notion/<export>/<path>` without Notion's ids.

Notion names every page and folder after its title and a 32-hex id (`Project plan
1a2b...6d.md`, the folder `Project plan 1a2b...6d/` holding its sub-pages); here the id is left
out of every part of a note's name (`notion/Export/Project plan/Sub page.md`), and kept, cut to 8
hex, only where two pages of one folder would otherwise share a name. A page's links to other
pages (`[Sub page](Project%20plan%201a2b...6d/Sub%20page%20...md)`, relative and URL-encoded)
are rewritten to those clean names, in the stored text and as the note's links, so they resolve as
wikilinks do: backlinks and `related_notes` work between pages. A database is its CSV, read as
a table (a row per chunk, `row N`); when an export has both `Tasks <id>.csv` and its
`Tasks <id>_all.csv` (every row, not only the view's), the latter is the table. Other files in a
format the product reads as prose (a PDF, a Word file) are read too; images are left out.

A zip is read member by member, each bounded by NOTE_MAX_BYTES (a large workspace's zip of
`Export-…-Part-N.zip` parts as one tree, each part copied once to an unnamed temporary file); an
export over MAX_MEMBERS files or MAX_TOTAL_BYTES uncompressed (a zip bomb, or not an export) is
refused whole, named, and its stored pages kept. A page that cannot be read fails alone. Exports
are only ever read.

Why a kind of its own rather than a NOTE_FOLDERS folder recognised as Notion's: a zip is no
folder, and a folder's notes keep their file names (a name is a file's path), while an export's
notes are renamed and their links rewritten; one module here touches nothing of the folders'.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import tempfile
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, ClassVar
from urllib.parse import unquote

from pydantic import Field

from kb.content import formats
from kb.content.formats.base import FormatError
from kb.content.notes import Note, NoteError, decode_note, parse_note
from kb.core.errors import ConfigError
from kb.core.kinds import PROSE, TEXT_NOTES, Domain, domain_of, is_secret, suffix_of
from kb.core.properties import DEFAULTS as DEFAULT_PROPERTIES
from kb.core.properties import Properties
from kb.core.settings import SOURCE, KindSettings, Settings, from_root
from kb.core.state import State
from kb.sources.base import Failure, Item, Listing, Source, SourceDefaults
from kb.sources.folder import claim_prefix
from kb.sources.kind import Kind, Shown

PREFIX = "notion"  # first component of every page's `source`
MAX_MEMBERS = 50_000  # files in one export
MAX_TOTAL_BYTES = 4 * 1024**3  # uncompressed, summed over the files read
CHUNK_CHARS = 1500  # as kb.content.notes.read_note gives the readers
# ` <32 hex>` after a title, before the suffix (and a database's `_all`)
_ID = re.compile(r"^(?P<title>.*?) (?P<id>[0-9a-f]{32})(?P<all>_all)?(?P<suffix>\.[^./]+)?$")
_LINK = re.compile(r"(\[[^\[\]\n]*\]\()([^()\n\s]+)(\))")  # a Markdown link's url


class ExportError(Exception):
    """An export that is not read at all (not a zip, a zip bomb): its pages are kept."""


class Export:
    """One export: its files by their path in it (POSIX), and how to read one."""

    name: str
    path: Path

    def members(self) -> dict[str, int]:
        """{path in the export: size uncompressed} of its files."""
        raise NotImplementedError

    def read(self, member: str, limit: int) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        pass


@dataclass
class ZipExport(Export):
    """A zip as Notion sends it: its pages, or (a large workspace) a zip of `…-Part-N.zip`
    parts, each holding part of the same tree: a part is copied once to an unnamed temporary
    file (owner-only, gone when closed), as a zip inside a zip cannot be read from cheaply."""

    name: str
    path: Path
    _open: list[zipfile.ZipFile] = field(default_factory=list, repr=False)
    _spills: list[IO[bytes]] = field(default_factory=list, repr=False)
    _where: dict[str, tuple[zipfile.ZipFile, str]] = field(default_factory=dict, repr=False)

    def members(self) -> dict[str, int]:
        self.close()
        found: dict[str, int] = {}
        outer = self._zip(self.path, "")
        parts = self._add(outer, found, parts=True)
        for part in parts:
            self._add(self._zip(self._spill(outer, part), f"{part}: "), found, parts=False)
        return found

    def _zip(self, file: Path | IO[bytes], where: str) -> zipfile.ZipFile:
        try:
            opened = zipfile.ZipFile(file)
        except (OSError, zipfile.BadZipFile) as exc:
            raise ExportError(f"{where}not a readable zip ({exc})") from None
        self._open.append(opened)
        if len(opened.infolist()) > MAX_MEMBERS:
            raise ExportError(f"{where}over {MAX_MEMBERS} files in the zip (not a Notion export?)")
        return opened

    def _add(self, archive: zipfile.ZipFile, found: dict[str, int], *, parts: bool) -> list[str]:
        """Add `archive`'s files to `found`; with `parts`, its `.zip` files are not added but
        returned (the parts of a large export)."""
        inner = []
        for info in archive.infolist():
            name = info.filename.replace("\\", "/")
            if info.is_dir() or name.startswith("/") or ".." in name.split("/"):
                continue
            if parts and name.lower().endswith(".zip"):
                inner.append(info.filename)
                continue
            if len(found) >= MAX_MEMBERS:
                raise ExportError(f"over {MAX_MEMBERS} files (not a Notion export?)")
            found[name] = info.file_size
            self._where[name] = (archive, info.filename)
        return inner

    def _spill(self, outer: zipfile.ZipFile, part: str) -> IO[bytes]:
        """The part `part` of `outer` copied to a temporary file, no further than
        MAX_TOTAL_BYTES."""
        spill = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self._spills.append(spill)
        copied = 0
        try:
            with outer.open(part) as stream:
                while chunk := stream.read(1024 * 1024):
                    copied += len(chunk)
                    if copied > MAX_TOTAL_BYTES:
                        raise ExportError(
                            f"{part}: over {MAX_TOTAL_BYTES:,} bytes uncompressed (a zip bomb?)"
                        )
                    spill.write(chunk)
        except (zipfile.BadZipFile, zlib.error, RuntimeError, NotImplementedError, EOFError) as exc:
            raise ExportError(f"{part}: cannot read it from the zip ({exc})") from None
        spill.seek(0)
        return spill

    def read(self, member: str, limit: int) -> bytes:
        archive, stored = self._where[member]
        try:
            with archive.open(stored) as stream:
                return stream.read(limit)
        except (zipfile.BadZipFile, zlib.error, RuntimeError, NotImplementedError, EOFError) as exc:
            raise NoteError(member, f"cannot read it from the zip ({exc})") from None

    def close(self) -> None:
        for opened in self._open:
            opened.close()
        for spill in self._spills:
            spill.close()
        self._open, self._spills, self._where = [], [], {}


@dataclass
class FolderExport(Export):
    name: str
    path: Path

    def members(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for folder, dirs, files in os.walk(self.path):  # links are not followed
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in files:
                path = Path(folder) / name
                if name.startswith(".") or path.is_symlink():
                    continue
                if len(found) >= MAX_MEMBERS:
                    raise ExportError(f"over {MAX_MEMBERS} files (not a Notion export?)")
                found[path.relative_to(self.path).as_posix()] = path.stat().st_size
        return found

    def read(self, member: str, limit: int) -> bytes:
        """No further than `limit`, never through a link swapped in since the listing."""
        try:
            fd = os.open(self.path / member, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise NoteError(member, "symlink (not followed)") from None
            raise
        with os.fdopen(fd, "rb") as handle:
            return handle.read(limit)


def clean_part(part: str) -> tuple[str, str]:
    """(a file or folder name without Notion's id, the id or ""): `Plan 1a2b...6d.md` ->
    (`Plan.md`, `1a2b...6d`); a database's `Tasks <id>_all.csv` -> `Tasks.csv`."""
    found = _ID.match(part)
    if found is None or not found.group("title").strip():
        return part, ""
    return found.group("title").strip() + (found.group("suffix") or ""), found.group("id")


def clean_names(paths: Sequence[str]) -> dict[str, str]:
    """{path in the export: its name without ids}, every folder renamed as its files are; two
    names in one folder that would be the same (case aside) keep their ids' first 8 hex."""
    files = set(paths)
    folders = {p.rsplit("/", i)[0] for p in paths for i in range(1, p.count("/") + 1)}
    cleaned = {"": ""}
    for level in range(max((p.count("/") for p in files), default=0) + 1):
        groups: dict[tuple[str, str], list[str]] = {}
        for raw in sorted(r for r in files | folders if r.count("/") == level):
            parent, _, part = raw.rpartition("/")
            name = clean_part(part)[0]
            groups.setdefault((cleaned[parent], name.casefold()), []).append(raw)
        for (parent, _), raws in groups.items():
            for raw in raws:
                name, ident = clean_part(raw.rpartition("/")[2])
                if len(raws) > 1 and ident:
                    suffix = suffix_of(name) if raw in files else ""
                    name = f"{name[: len(name) - len(suffix)]} {ident[:8]}{suffix}"
                cleaned[raw] = f"{parent}/{name}" if parent else name
    return {p: cleaned[p] for p in paths}


@dataclass(frozen=True)
class Place:
    export: Export
    member: str  # its path in the export, ids and all


@dataclass
class NotionSource(SourceDefaults):
    """The NOTION exports (see the module docstring)."""

    exports: list[Export]
    suffixes: tuple[str, ...] = TEXT_NOTES  # INDEX_EXTENSIONS: the prose kinds read
    properties: Properties = field(default_factory=lambda: dict(DEFAULT_PROPERTIES))
    origin = PREFIX
    complete = True
    domains: ClassVar[tuple[Domain, ...]] = (PROSE,)
    _places: dict[str, Place] = field(default_factory=dict, repr=False)
    _names: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)
    _refused: set[str] = field(default_factory=set, repr=False)  # exports not read this run

    @property
    def root(self) -> Path:
        return self.exports[0].path.parent

    def listing(self, *, everything: bool) -> Listing:
        listing = Listing()
        self._places, self._names, self._refused = {}, {}, set()
        for export in self.exports:
            try:
                members = export.members()
            except (ExportError, OSError) as exc:
                self._refused.add(export.name)
                listing.failed.append(Failure(f"{PREFIX}/{export.name}", f"{export.path}: {exc}"))
                continue
            wanted, views = self._wanted(members, listing, export.name)
            total = sum(members[m] for m in wanted)
            if total > MAX_TOTAL_BYTES:
                self._refused.add(export.name)
                reason = f"{export.path}: over {MAX_TOTAL_BYTES:,} bytes uncompressed (a zip bomb?)"
                listing.failed.append(Failure(f"{PREFIX}/{export.name}", reason))
                continue
            names = clean_names(sorted(set(members) - set(views)))
            names.update({view: names[every] for view, every in views.items()})
            for member in wanted:
                source = f"{PREFIX}/{export.name}/{names[member]}"
                if source in self._places:  # `plan.md` and `Plan.md`, both without an id
                    listing.failed.append(Failure(source, f"{member}: another file has its name"))
                    continue
                self._places[source] = Place(export, member)
                item_path = export.path / member
                listing.items.append(Item(source, item_path, source, pending=False, own_file=False))
            self._names.update({(export.name, raw): clean for raw, clean in names.items()})
        return listing

    def _wanted(
        self, members: dict[str, int], listing: Listing, export: str
    ) -> tuple[list[str], dict[str, str]]:
        """The files read as notes: pages, databases and prose files of INDEX_EXTENSIONS; and
        {a database's view `Tasks <id>.csv`: its `_all.csv`, read in its place}."""
        wanted, views = [], {}
        for member in sorted(members):
            base = member.rpartition("/")[2]
            suffix = suffix_of(base)
            if base.startswith(".") or member.startswith("__MACOSX/") or is_secret(base):
                continue
            if suffix not in self.suffixes or domain_of(base) != PROSE:
                listing.ignored.append(f"{PREFIX}/{export}/{member}")
                continue
            if suffix == ".csv" and member[: -len(suffix)] + "_all.csv" in members:
                views[member] = member[: -len(suffix)] + "_all.csv"
                continue
            wanted.append(member)
        return wanted, views

    def read(self, item: Item, *, max_bytes: int) -> Note:
        place = self._places[item.source]
        data = place.export.read(place.member, max_bytes + 1)
        if len(data) > max_bytes:
            raise NoteError(item.source, f"over {max_bytes} bytes (NOTE_MAX_BYTES)")
        name = place.member.rpartition("/")[2]
        if suffix_of(name) not in TEXT_NOTES:
            return _other(item, name, data)
        text = decode_note(data, item.source)
        markdown = suffix_of(name) == ".md"
        text = self._relinked(text, place) if markdown else text
        return parse_note(text, item.path, item.source, markdown=markdown,
                          properties=self.properties)  # fmt: skip

    def _relinked(self, text: str, place: Place) -> str:
        """`text` with its links to files of the export rewritten to their clean names,
        relative and `./` first: kb.content.obsidian.Vault resolves them as it resolves a
        vault's (`[Sub page](<./Plan/Sub page.md>)`)."""
        export = place.export.name
        here = posixpath.dirname(place.member)
        clean_here = posixpath.dirname(self._names.get((export, place.member), place.member))

        def relink(found: re.Match[str]) -> str:
            target, hash_, heading = found.group(2).partition("#")
            raw = posixpath.normpath(posixpath.join(here, unquote(target)))
            clean = self._names.get((export, raw))
            if not target or clean is None:
                return found.group(0)
            relative = posixpath.relpath(clean, clean_here or ".")
            return f"{found.group(1)}<./{relative}{hash_}{heading}>{found.group(3)}"

        return _LINK.sub(relink, text)

    def holds(self, source: str) -> bool:
        if source in self._places:
            return True
        parts = source.split("/")
        return len(parts) > 2 and parts[1] in self._refused  # an export not read: kept

    def after_store(self, items: Sequence[Item]) -> list[OSError | None]:
        return [None] * len(items)  # read only: nothing is done to an export

    def finish(self) -> None:
        for export in self.exports:
            export.close()

    def too_many_gone(self, gone: int, live: int) -> str:
        return (
            f"NOTION: {gone} of its {live} pages are gone from the exports (an export replaced "
            "by a partial one, or a workspace exported from another page?)"
        )


def _other(item: Item, name: str, data: bytes) -> Note:
    """A database's CSV (a table) or another prose file, read by its kb.content.formats reader."""
    try:
        parsed = formats.parse(name, data, CHUNK_CHARS)
    except FormatError as exc:
        raise NoteError(item.source, exc.reason) from None
    if not parsed.text.strip():
        raise NoteError(item.source, "no text to index")
    return Note(
        path=item.path, source=item.source, text=parsed.text, body_start=0,
        tags=(), topic=None, document_date=None, kind=parsed.kind,
        domain=parsed.domain, blocks=tuple(parsed.blocks), marks=tuple(parsed.marks),
        markdown=parsed.markdown, notice=parsed.notice,
    )  # fmt: skip


def parse_entries(value: str) -> list[tuple[str, Path]]:
    """NOTION as (name, path) pairs: `name=path`, or a path named by its file (`.zip` left out)
    or folder, without Notion's id."""
    pairs = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        name, sep, text = entry.partition("=")
        if not sep:
            name, text = "", entry
        path = from_root(Path(text.strip()).expanduser())
        default = path.name[: -len(".zip")] if path.name.lower().endswith(".zip") else path.name
        pairs.append((name.strip() or clean_part(default)[0], path))
    return pairs


class NotionSettings(KindSettings):
    """NOTION (docs/guide/notion.md)."""

    NOTION: str = Field(
        "",
        description="Comma-separated Notion exports synced as a source (Markdown & CSV: the zip "
        "or its unpacked folder; `name=path` names one; results under notion/<name>/): pages "
        "without Notion's ids, links between them as backlinks, databases as tables.",
        json_schema_extra=SOURCE,
    )


def notion_source(settings: Settings) -> list[NotionSource]:
    """The NOTION source (none when NOTION is empty); ConfigError naming the entry that is
    missing, badly named or named twice, or when a NOTE_FOLDERS folder is named `notion`."""
    exports: list[Export] = []
    for name, path in parse_entries(settings.of(NotionSettings).NOTION):
        where = f"NOTION: {name}={path}"
        if not name or "/" in name or name.startswith("."):
            raise ConfigError(f"{where}: {name!r} cannot name an export (no '/', no leading '.')")
        if any(e.name == name for e in exports):
            raise ConfigError(f"{where}: the name {name!r} is used twice; give each its own")
        if path.is_dir():
            exports.append(FolderExport(name, path))
        elif path.is_file():
            exports.append(ZipExport(name, path))
        else:
            raise ConfigError(f"{where}: {path} does not exist (a drive unmounted?)")
    if not exports:
        return []
    claim_prefix("NOTION", PREFIX, "pages", settings.NOTE_FOLDERS)
    suffixes = tuple(s for s in settings.index_extensions if domain_of(f"x{s}") == PROSE)
    return [NotionSource(exports, suffixes, dict(settings.note_properties))]


class Notion(Kind):
    """The NOTION exports: pages and databases read back from what the index stored."""

    name = PREFIX
    setting = "NOTION"
    settings_model = NotionSettings
    order = 5
    prefix = PREFIX
    unseen = (
        "no page of the NOTION exports is named so (a page is named by its export and its "
        "path without Notion's ids: search_notes gives its name)"
    )

    def build(self, settings: Settings, state: State) -> list[Source]:
        return list(notion_source(settings))

    def shown(self, settings: Settings) -> list[Shown]:
        """Every export as one row (their pages' origin is `notion`), logged as the source is."""
        entries = parse_entries(settings.of(NotionSettings).NOTION)
        if not entries:
            return []
        missing = next((f"{n}={p}" for n, p in entries if not p.exists()), None)
        problem = f"NOTION: {missing} does not exist (a drive unmounted?)" if missing else None
        where = ", ".join(str(path) for _, path in entries)
        return [Shown(PREFIX, self.setting, where, str(entries[0][1].parent), problem)]


KIND = Notion()
