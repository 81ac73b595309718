"""Evernote exports as a source (EVERNOTE): each note of an `.enex` file one item of kind `note`,
named `evernote/<notebook>/<title>-<hash>`, with its title, created and updated dates and tags.

EVERNOTE names `.enex` files (Evernote's "Export notebook" writes one per notebook) or folders
holding them. Why a setting of its own rather than a file format inside NOTE_FOLDERS: a folder's
file is one item (its staleness, its read-back and its soft delete are the file's), while an
export holds many notes, as a mailbox holds many messages; the mail kind's seams (items without
a file of their own, read back from what the index stored, each gone note soft-deleted) fit it
as they are, so this kind is this module and one setting.

An export is read streaming (defusedxml's iterparse: a DTD is allowed, entity declarations and
external references are refused, so an XML bomb fails its file, by name), one note at a time,
and only each note's text is kept. A note's ENML is read as the product reads a web page
(kb.content.formats); its checkboxes read `[ ]`/`[x]`, its encrypted blocks are left out. Its
resources (base64, with their mime type): a PDF, Word, HTML, CSV or text file is searched with
its note under its own heading (`Attachment: menu.pdf, p. 2`); an image is named where it sits
(`[image: whiteboard.jpg]`), and its text is the words Evernote recognised in it (the export's
<recognition>), else what `image_text` reads (the seam OCR fills). A broken note (a resource
that is not base64, no content, over NOTE_MAX_BYTES) fails alone, named by its file and title;
a file that stops being XML halfway keeps the notes read before the break and the stored notes
after it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import mimetypes
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar
from xml.etree.ElementTree import Element, ParseError

# defusedxml ships no type information (its stubs would be one more pin for three names)
from defusedxml import DefusedXmlException, EntitiesForbidden  # type: ignore[import-untyped]
from defusedxml.ElementTree import fromstring, iterparse  # type: ignore[import-untyped]
from pydantic import Field

from kb.content import formats
from kb.content.formats.base import Block, FormatError, decode_text
from kb.content.notes import Note, NoteError, normalise_tags, with_parents
from kb.core.kinds import PROSE, TEXT_NOTES, Domain, suffix_of
from kb.core.settings import SOURCE, KindSettings, Settings
from kb.core.state import State
from kb.sources.base import Failure, Item, Listing, Source, SourceDefaults
from kb.sources.folder import claim_prefix
from kb.sources.kind import Kind, existing_paths

log = logging.getLogger(__name__)

PREFIX = "evernote"  # first component of every note's `source`
NOTE_REMOVED = "note_removed"  # deleted_cause of a note gone from its export
CHUNK_CHARS = 2000  # chunk size given to a resource's reader (tables, code)
TITLE_CHARS = 80  # of a note's title in its name
_DATE = "%Y%m%dT%H%M%SZ"  # Evernote's dates: 20240301T101500Z, UTC
# ENML's XML declaration and DOCTYPE, before <en-note>: read as HTML, the rest needs neither
_PROLOG = re.compile(r"\A\s*(?:<\?xml[^>]*\?>\s*)?(?:<!DOCTYPE[^>]*>\s*)?", re.IGNORECASE)


@dataclass
class EvernoteSource(SourceDefaults):
    """The EVERNOTE exports (see the module docstring)."""

    paths: list[Path]
    max_bytes: int  # NOTE_MAX_BYTES, per note (its content and decoded resources)
    origin = PREFIX
    complete = True
    domains: ClassVar[tuple[Domain, ...]] = (PROSE,)
    deletion_cause = NOTE_REMOVED
    # what the last listing read: each note's Note, or the NoteError it fails with
    _notes: dict[str, Note | NoteError] = field(default_factory=dict, repr=False)
    _cut: list[str] = field(default_factory=list, repr=False)  # notebooks not read to the end

    @property
    def root(self) -> Path:
        return self.paths[0].parent

    def listing(self, *, everything: bool) -> Listing:
        listing = Listing()
        self._notes, self._cut = {}, []
        for top in self.paths:
            for path, notebook in _exports(top):
                self._read_export(path, notebook, listing)
        return listing

    def _read_export(self, path: Path, notebook: str, listing: Listing) -> None:
        seen: dict[str, int] = {}
        try:
            for number, entry in enumerate(_entries(path), 1):
                title = entry.title or f"untitled note {number}"
                key = f"{entry.created}|{title}"
                seen[key] = seen.get(key, 0) + 1
                source = f"{PREFIX}/{notebook}/{_name(title, key, seen[key])}"
                shown = f"{path.name} (note {title[:TITLE_CHARS]!r})"
                if source in self._notes:  # the same notebook named twice: read once
                    skipped = listing.skipped
                    skipped["duplicate note"] = skipped.get("duplicate note", 0) + 1
                    continue
                try:
                    self._notes[source] = note_of(entry, source, path, self.max_bytes)
                except NoteError as exc:
                    self._notes[source] = exc
                except Exception as exc:  # a bug: this note fails, the export goes on
                    log.exception("%s could not be read (a bug: please report it)", shown)
                    reason = f"could not be read ({type(exc).__name__})"
                    self._notes[source] = NoteError(source, reason)
                listing.items.append(Item(source, path, shown, pending=False, own_file=False))
        except OSError as exc:
            self._cut.append(f"{PREFIX}/{notebook}/")
            listing.failed.append(Failure(path.name, f"cannot read it ({exc.strerror})"))
        except _Refused as exc:
            self._cut.append(f"{PREFIX}/{notebook}/")
            listing.failed.append(Failure(path.name, str(exc)))

    def read(self, item: Item, *, max_bytes: int) -> Note:
        found = self._notes[item.source]
        if isinstance(found, NoteError):
            raise found
        return found

    def holds(self, source: str) -> bool:
        """A listed note, or any note of an export that could not be read to its end (those
        after the break are kept, not soft-deleted)."""
        return source in self._notes or source.startswith(tuple(self._cut))

    def after_store(self, items: Sequence[Item]) -> list[OSError | None]:
        return [None] * len(items)  # read only: nothing is done to an export

    def finish(self) -> None:
        self._notes = {}

    def too_many_gone(self, gone: int, live: int) -> str:
        return (
            f"EVERNOTE: {gone} of its {live} notes are gone from the exports (an export moved, "
            "or replaced by a smaller one?)"
        )


# --- reading an export ---------------------------------------------------------------------


class _Refused(Exception):
    """An export that is not read on (not XML from some line on, or an XML bomb)."""


@dataclass
class Resource:
    mime: str
    name: str  # its file-name, else `resource-N` and the mime type's suffix
    data: str  # base64, as in the export
    recognition: str = ""  # Evernote's own recoIndex: the words it recognised in an image


@dataclass
class Entry:
    """One <note> of an export, as its elements hold it."""

    title: str
    created: str
    updated: str
    tags: list[str]
    source_url: str
    content: str  # ENML
    resources: list[Resource]


def _exports(top: Path) -> Iterator[tuple[Path, str]]:
    """(export, its notebook's name in the notes' sources) for each `.enex` under `top`
    (links are not followed, hidden names skipped)."""
    if top.is_file():
        yield top, _notebook(top.name)
        return
    for folder, dirs, files in os.walk(top):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = here / name
            if suffix_of(name) == ".enex" and not name.startswith(".") and not path.is_symlink():
                yield path, _notebook(path.relative_to(top.parent).as_posix())


def _notebook(relative: str) -> str:
    return relative[: -len(".enex")] if relative.lower().endswith(".enex") else relative


def _name(title: str, key: str, occurrence: int) -> str:
    """A note's stable name: its title made a path part, and a hash of its creation date,
    title and occurrence (two notes of the same title and date stay apart)."""
    words = " ".join(re.sub(r"[/\\\x00-\x1f]", "-", title).split()).lstrip(".")
    digest = hashlib.sha256(f"{key}|{occurrence}".encode()).hexdigest()[:8]
    return f"{words[:TITLE_CHARS].rstrip() or 'untitled'}-{digest}"


def _entries(path: Path) -> Iterator[Entry]:
    """Each <note> of the export at `path`, read streaming; _Refused once the XML breaks."""

    # a DTD is allowed (every export names Evernote's); entities and external references not
    events = iterparse(str(path), events=("start", "end"), forbid_dtd=False)
    root: Element | None = None
    try:
        for event, element in events:
            if root is None:
                root = element
            if event == "end" and element.tag == "note":
                yield _entry(element)
                root.clear()  # the notes read so far leave memory
    except ParseError as exc:
        line = exc.position[0] if exc.position else "?"
        raise _Refused(
            f"not well-formed XML from line {line}: the notes after it not read"
        ) from None
    except EntitiesForbidden:
        raise _Refused(
            "refused: it declares XML entities (an XML bomb, or a file of this machine?)"
        ) from None
    except DefusedXmlException as exc:
        raise _Refused(f"refused: {type(exc).__name__}") from None


def _entry(element: Any) -> Entry:
    def text(parent: Any, tag: str) -> str:
        found = parent.find(tag)
        return (found.text or "").strip() if found is not None else ""

    attributes = element.find("note-attributes")
    resources = []
    for number, resource in enumerate(element.findall("resource"), 1):
        mime = text(resource, "mime") or "application/octet-stream"
        found = resource.find("resource-attributes")
        name = text(found, "file-name") if found is not None else ""
        if not name:
            name = f"resource-{number}{mimetypes.guess_extension(mime) or ''}"
        name = " ".join(name.split())[:200]
        found_words = resource.findtext("recognition") or ""
        resources.append(Resource(mime, name, text(resource, "data"), found_words))
    return Entry(
        title=" ".join(text(element, "title").split()),
        created=text(element, "created"),
        updated=text(element, "updated"),
        tags=[t.text or "" for t in element.findall("tag")],
        source_url=text(attributes, "source-url") if attributes is not None else "",
        content=element.findtext("content") or "",
        resources=resources,
    )


# --- a note as the index reads it ----------------------------------------------------------


def note_of(entry: Entry, source: str, path: Path, max_bytes: int) -> Note:
    """A note as a Note: `# title`, a line of its dates, tags and web address, its ENML as
    text, then each readable resource, a block located by its name (and page)."""
    title = entry.title or "(untitled)"
    if not entry.content.strip():
        raise NoteError(source, "no <content> (not an Evernote note?)")
    size = len(entry.content) + sum(len(r.data) * 3 // 4 for r in entry.resources)
    if size > max_bytes:
        raise NoteError(source, f"note over {max_bytes} bytes (NOTE_MAX_BYTES)")
    notices: list[str] = []
    created = _date(entry.created, "created", notices)
    updated = _date(entry.updated, "updated", notices)
    decoded = [(r, _decoded(r, source)) for r in entry.resources]
    by_hash = {hashlib.md5(data, usedforsecurity=False).hexdigest(): r for r, data in decoded}
    body = enml_text(entry.content, by_hash)
    tags = normalise_tags(entry.tags)
    facts = [f"{label} {value[:10]}" for label, value in (("created", created),
             ("updated", updated)) if value]  # fmt: skip
    if tags:
        facts.append("tags: " + ", ".join(tags))
    if entry.source_url:
        facts.append(f"from {entry.source_url[:500]}")
    text = "\n".join([f"# {title}", "", " · ".join(facts), "", body.strip()]).rstrip() + "\n"
    tail = []
    for resource, data in decoded:  # each apart, located by its name
        found: tuple[str, list[Block]] | None = None
        if resource.mime.startswith("image/") and resource.recognition:
            words = recognised(resource.recognition)  # Evernote read it already: no OCR again
            found = (words, []) if words else None
        try:
            found = found or resource_text(resource.name, resource.mime, data)
        except FormatError as exc:
            if not resource.recognition:
                notices.append(f"{resource.name}: not read ({exc.reason})")
        if (found is None or not found[0].strip()) and resource.recognition:
            words = recognised(resource.recognition)  # a scan, a photo: what Evernote read
            found = (words, []) if words else None
        if found is None or not found[0].strip():
            continue
        content, blocks = found
        head = f"{'Image' if resource.mime.startswith('image/') else 'Attachment'}: "
        head += resource.name
        lead = len(content) - len(content.lstrip("\n"))
        begin = len(text) + 1 - lead
        text += f"\n{content.strip(chr(10))}\n"
        for block in blocks or [Block(lead, lead + len(content.strip(chr(10))))]:
            where = f"{head}, {block.locator}" if block.locator else head
            tail.append(Block(begin + block.start, begin + block.end, where, (head,), block.code))
    if not body.strip() and not tail:
        raise NoteError(source, "no text: an empty note, or only resources that have none")
    return Note(
        path, source, text, 0, tuple(with_parents(tags)), None, created,
        tail=tuple(tail), notice="; ".join(notices) or None,
    )  # fmt: skip


def _date(value: str, what: str, notices: list[str]) -> str | None:
    if not value:
        return None
    try:
        return datetime.strptime(value, _DATE).replace(tzinfo=UTC).isoformat()
    except ValueError:
        notices.append(f"{what} {value[:40]!r} is not an Evernote date; not dated by it")
        return None


def _decoded(resource: Resource, source: str) -> bytes:
    try:
        return base64.b64decode("".join(resource.data.split()), validate=True)
    except (binascii.Error, ValueError):
        raise NoteError(
            source, f"its resource {resource.name} ({resource.mime}) is not valid base64 data"
        ) from None


def enml_text(enml: str, resources: dict[str, Resource]) -> str:
    """A note's ENML as the product reads a web page: each <en-media> named where it sits,
    <en-todo> as `[ ]`/`[x]`, <en-crypt> left out."""
    from bs4 import BeautifulSoup  # imported here: finding the kinds loads no HTML parser

    soup = BeautifulSoup(_PROLOG.sub("", enml, count=1), "html.parser")
    for media in soup.find_all("en-media"):
        resource = resources.get(str(media.get("hash") or "").lower())
        name = resource.name if resource else str(media.get("type") or "resource")
        kind = "image" if str(media.get("type") or "").startswith("image/") else "attachment"
        media.replace_with(f" [{kind}: {name}] ")
    for todo in soup.find_all("en-todo"):
        todo.replace_with("[x] " if str(todo.get("checked")).lower() == "true" else "[ ] ")
    for crypt in soup.find_all("en-crypt"):
        crypt.replace_with(" [encrypted] ")
    note = soup.find("en-note")
    html = f"<html><body>{note.decode_contents() if note else str(soup)}</body></html>"
    try:
        return formats.parse("note.html", html.encode(), CHUNK_CHARS).text
    except FormatError:
        return ""  # no visible text: the note may be only its resources


def resource_text(name: str, mime: str, data: bytes) -> tuple[str, list[Block]] | None:
    """A resource's text and its blocks in a format the product reads, None for one it does not
    (an image without `image_text`, audio); FormatError for a broken one."""
    if mime.startswith("image/"):
        found = image_text(name, data)
        return (found, []) if found else None
    suffix = suffix_of(name) or (mimetypes.guess_extension(mime) or "")
    if suffix in TEXT_NOTES:
        return decode_text(data), []
    try:
        parsed = formats.parse(f"resource{suffix}", data, CHUNK_CHARS)
    except FormatError as exc:
        if exc.reason.startswith("no reader for"):
            return None
        raise
    return parsed.text, parsed.blocks


def recognised(reco_index: str) -> str:
    """The words Evernote recognised in a resource (its <recognition>: a recoIndex of items,
    each with candidate words `<t w="weight">`), the likeliest of each item, in its order; ""
    for a recoIndex that is not XML or declares entities."""
    try:
        index = fromstring(_PROLOG.sub("", reco_index.strip(), count=1), forbid_dtd=False)
    except (ParseError, DefusedXmlException):
        return ""
    words = []
    for item in index.iter("item"):
        candidates = [(int(t.get("w") or 0), (t.text or "").strip()) for t in item.iter("t")]
        best = max(candidates, default=(0, ""))[1]
        if best:
            words.append(best)
    return " ".join(words)


def image_text(name: str, data: bytes) -> str | None:
    """The text inside an image resource (kb.content.formats' image reader: OCR, cached per
    content hash), None when none is read (no text, OCR=off, a suffix no reader takes)."""
    try:
        return formats.parse(name, data, CHUNK_CHARS).text or None
    except FormatError:
        return None


class EvernoteSettings(KindSettings):
    """EVERNOTE (docs/guide/evernote.md)."""

    EVERNOTE: str = Field(
        "",
        description="Comma-separated Evernote exports synced as a source (each note one item, "
        "results under evernote/<notebook>/): .enex files or folders of them.",
        json_schema_extra=SOURCE,
    )


def evernote_sources(settings: Settings) -> list[EvernoteSource]:
    """The EVERNOTE source (none when EVERNOTE is empty); ConfigError naming the entry for one
    that is missing, or when a NOTE_FOLDERS folder is named `evernote`."""
    paths = existing_paths("EVERNOTE", settings.of(EvernoteSettings).EVERNOTE)
    if not paths:
        return []
    claim_prefix("EVERNOTE", PREFIX, "notes", settings.NOTE_FOLDERS)
    return [EvernoteSource(paths, settings.NOTE_MAX_BYTES)]


class Evernote(Kind):
    """The EVERNOTE exports: each note an item of kind `note`, read back from what the index
    stored (its text, as search found it)."""

    name = PREFIX
    setting = "EVERNOTE"
    settings_model = EvernoteSettings
    order = 5
    prefix = PREFIX
    unseen = (
        "no note of the EVERNOTE exports is named so (evernote/<notebook>/<title>-<hash>: "
        "search_notes with folder evernote gives its name)"
    )

    def build(self, settings: Settings, state: State) -> list[Source]:
        return list(evernote_sources(settings))


KIND = Evernote()
