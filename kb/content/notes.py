"""Read one note: validate the file, parse its YAML frontmatter, normalise tags, topic and date.

A note is a UTF-8 `.md` or `.txt` file. An optional frontmatter block opens it:

    ---
    tags: [Korean Cuisine, recipes]      # or "korean cuisine, recipes"
    topic: How I make kimchi at home.
    document_date: 2024-03-01
    private: true                        # never embedded or stored (a YAML boolean)
    ---

A web page saved as a note (save_url writes them) says so with `kind: web`, its `url`, and
optionally `site`, `author` and `fetched_at`: its results then carry them like a bookmarked
page's (kb.sources.web).
Obsidian's names for the same things are read too (kb.core.properties, the setting
NOTE_PROPERTIES): `aliases`, `description`/`summary` for the topic, `date`/`created`/`updated` for
the date; a daily note named `2024-03-01.md` (or `2024-03-01 Standup.md`) is dated by its name
when no property dates it. A Markdown body's inline tags (`#project/alpha`), links and the edits
that make its embedded text (kb.content.obsidian) are read with it; a tag stands for its parents
too (`project/alpha` is also `project`), so filters and counts on a parent take in its children.
A value under an Obsidian key that cannot be used (`created: "{{date}}"`) is left out with a
notice; under this project's own keys it fails the note, as before.

Files that cannot be notes (binary, not UTF-8, empty, too large) raise `NoteError` with a reason;
the caller reports them and leaves them where they are. Frontmatter that is not valid YAML raises
`FrontmatterError`, which stops an inbox run (a folder's note fails alone: kb.ingest.prepare).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import unicodedata
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from kb.content import formats, obsidian
from kb.content.formats.base import Block, FormatError, NoText, decode_text
from kb.content.obsidian import Edit, Link
from kb.core import properties as note_properties
from kb.core.limits import TooComplex, bounded, check_yaml, shown
from kb.core.properties import Properties
from kb.core.schema import WEB

NOTE_SUFFIXES = formats.TEXT_NOTES  # Markdown and text: frontmatter, heading chunks

# `---` alone on the first line opens the block; `---` or `...` alone on a line closes it.
_OPEN = re.compile(r"---[ \t]*\r?\n")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.MULTILINE)
_DAILY = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[ _]|$)")  # `2024-03-01.md`, `2024-03-01 Standup.md`


class NoteError(Exception):
    """A file that cannot be ingested as a note; `reason` says why (no note text in it)."""

    def __init__(self, path: Path | str, reason: str) -> None:
        reason = bounded(reason)
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class NoTextNote(NoteError):
    """A file read whole with no text in it (kb.content.formats.base.NoText): skipped."""


class FrontmatterError(NoteError):
    """The frontmatter block is not valid YAML (or not a mapping): stops an inbox run."""


class PrivateFieldError(NoteError):
    """`private` is not a YAML boolean: the note fails, and is taken out of the index until the
    field is fixed (it may well be meant as private)."""


@dataclass(frozen=True)
class Note:
    path: Path  # where the file is now
    source: str  # POSIX path relative to the notes root (the same before and after the move)
    text: str  # the whole file, decoded
    body_start: int  # character offset in `text` where the note's body starts (after frontmatter)
    tags: tuple[str, ...]
    topic: str | None
    document_date: str | None  # ISO 8601 date or datetime
    private: bool = False  # `private: true`: never embedded or stored (kb.ingest.prepare)
    # payload fields a source sets beyond a file's (kb.sources.youtube.playlist: kind, channel, url
    # ...)
    record: Mapping[str, Any] | None = None
    # other file kinds (kb.content.formats): `text` is their readable text, cut into these blocks
    kind: str = "prose"  # prose, table, config, notebook, code
    domain: str = formats.PROSE  # the collection its chunks belong to: prose or code
    blocks: tuple[Block, ...] = ()
    marks: tuple[tuple[int, str], ...] = ()  # (offset, locator) such as a docx's `¶ N`
    # blocks after a Markdown body (a video's caption passages, kb.sources.youtube.playlist): the
    # text
    # before the first is chunked as Markdown, each block apart with its locator
    tail: tuple[Block, ...] = ()
    markdown: bool = True  # without blocks: cut along Markdown headings, else plain text
    notice: str | None = None  # indexed in a lesser way (a .py that does not parse)
    aliases: tuple[str, ...] = ()  # other names of the note (frontmatter `aliases`)
    # frontmatter `lang` / `language`, its primary subtag lower-cased ("pt-BR" -> "pt"): the
    # language its keywords are analysed in (kb.embedding.languages), else detected per chunk
    language: str | None = None
    links: tuple[Link, ...] = ()  # what its body and frontmatter link to (kb.content.obsidian)
    edits: tuple[Edit, ...] = ()  # offsets in `text`: what embedding shows differently

    @property
    def body(self) -> str:
        return self.text[self.body_start :]


def is_private(note: Note, private_tags: Collection[str]) -> bool:
    """`private: true`, or a tag listed in `private_tags` (PRIVATE_TAGS, both normalised): never
    indexed (kb.ingest.prepare) and never read back (kb.search.read). A note's tags hold the
    parents of its nested ones, so `health` makes `health/sleep` notes private too."""
    return note.private or any(tag in private_tags for tag in note.tags)


def normalise_tag(tag: str) -> str:
    """`"  Korean   Cuisine "` -> `"korean cuisine"` (NFC, lowercased, whitespace collapsed);
    `"#Project / Alpha"` -> `"project/alpha"` (a leading `#` dropped, nesting kept)."""
    text = unicodedata.normalize("NFC", tag).lower().strip().lstrip("#")
    parts = (" ".join(part.split()) for part in text.split("/"))
    return "/".join(part for part in parts if part)


def with_parents(tags: Iterable[str]) -> list[str]:
    """Each nested tag preceded by its parents: `project/alpha` -> `project`, `project/alpha`
    (what a filter on `project` or its count in list_tags takes in)."""
    out: list[str] = []
    for tag in tags:
        parts = tag.split("/")
        for depth in range(1, len(parts) + 1):
            name = "/".join(parts[:depth])
            if name not in out:
                out.append(name)
    return out


def normalise_tags(value: Any) -> list[str]:
    """Tags from a YAML list or a comma-separated string: normalised, empties and repeats dropped.

    Raises ValueError for shapes that cannot be tags (mappings, nested lists).
    """
    if value is None:
        return []
    if isinstance(value, str):
        items: Iterable[Any] = value.split(",")
    elif isinstance(value, list | tuple):
        items = value
    else:
        items = [value]
    tags: list[str] = []
    for item in items:
        if isinstance(item, dict | list | tuple | set):
            raise ValueError("tags must be a list of words or a comma-separated string")
        if item is None:
            continue
        tag = normalise_tag(str(item))
        if tag and tag not in tags:
            tags.append(tag)
    return tags


def private_flag(value: Any) -> bool:
    """The `private` field: a YAML boolean (`true`/`false`; YAML 1.1's `yes`/`no`/`on`/`off`
    are booleans too), absent meaning False.

    Raises ValueError for anything else (`"true"` in quotes, `1`, `maybe`): a note whose privacy
    is unclear is refused rather than guessed either way.
    """
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise ValueError(
        f"private must be true or false (a YAML boolean, unquoted), not {shown(value)}; "
        "the note was not indexed"
    )


def iso_date(value: Any) -> str | None:
    """`document_date` as ISO 8601: YAML dates and datetimes, or strings in ISO form.

    Raises ValueError for anything else (`next tuesday`, `2024`).
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str):
        text = value.strip()
        try:
            return date.fromisoformat(text).isoformat()
        except ValueError:
            pass
        try:
            return datetime.fromisoformat(text).isoformat()
        except ValueError:
            pass
    raise ValueError(f"document_date {shown(value)} is not a date (use e.g. 2024-03-01)")


def split_frontmatter(text: str, path: Path | str) -> tuple[dict[str, Any], int]:
    """The frontmatter mapping and the offset where the body starts ({} and 0 when none)."""
    start = 1 if text.startswith("\ufeff") else 0  # a UTF-8 byte-order mark
    opening = _OPEN.match(text, start)
    if opening is None:
        return {}, start
    closing = _CLOSE.search(text, opening.end())
    if closing is None:
        raise FrontmatterError(
            path, "frontmatter opened with '---' on line 1 has no closing '---' line"
        )
    block = text[opening.end() : closing.start()]
    import yaml  # here: a search through the MCP server reads no frontmatter

    try:
        check_yaml(block)
    except TooComplex as exc:  # not a typo to fix: the note fails alone, even in the inbox
        raise NoteError(path, f"frontmatter {exc}") from None
    except yaml.YAMLError:
        pass  # said below, with its line
    try:
        meta = yaml.safe_load(block)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        # the block starts on the file's line 2; marks count lines from 0
        where = f"line {mark.line + 2}" if mark is not None else "frontmatter"
        problem = exc.problem or exc.context or "invalid YAML"
        reason = f"frontmatter is not valid YAML ({where}: {problem})"
        raise FrontmatterError(path, reason) from None
    except (yaml.YAMLError, ValueError) as exc:
        # PyYAML raises plain ValueError for impossible timestamps such as 2024-13-45
        raise FrontmatterError(path, f"frontmatter is not valid YAML ({exc})") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise FrontmatterError(
            path, f"frontmatter must be YAML 'key: value' lines, not a {type(meta).__name__}"
        )
    return meta, closing.end()


def decode_note(data: bytes, path: Path | str) -> str:
    """File bytes -> text, or NoteError saying why they are not a text note."""
    try:
        return decode_text(data)
    except FormatError as exc:
        raise NoteError(path, exc.reason) from None


def _first(meta: Mapping[str, Any], keys: Iterable[str]) -> Iterable[tuple[str, Any]]:
    """(key, value) of the keys present with a value, in the order given."""
    for key in keys:
        value = meta.get(key)
        if value is not None and value != "" and value != []:
            yield key, value


def _date(
    meta: Mapping[str, Any], keys: Iterable[str], path: Path, source: str, notices: list[str]
) -> str | None:
    """The note's date: the first key that holds one, else a daily note's name."""
    for key, value in _first(meta, keys):
        try:
            return iso_date(value)
        except ValueError as exc:
            if key == "document_date":
                raise NoteError(path, str(exc)) from None
            notices.append(f"{key}: {shown(value)} is not a date; the note is not dated by it")
    daily = _DAILY.match(PurePosixPath(source).stem)
    if daily:
        try:
            return date.fromisoformat(daily.group(1)).isoformat()
        except ValueError:
            return None
    return None


def _topic(meta: Mapping[str, Any], keys: Iterable[str], path: Path, notices: list[str]) -> str:
    for key, value in _first(meta, keys):
        if isinstance(value, dict | list):
            if key == "topic":
                raise NoteError(path, "topic must be one sentence of text")
            notices.append(f"{key}: not one sentence of text; not used as the topic")
            continue
        return " ".join(str(value).split())
    return ""


def _aliases(meta: Mapping[str, Any], keys: Iterable[str], notices: list[str]) -> list[str]:
    out: list[str] = []
    for key, value in _first(meta, keys):
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            items = [items]
        for item in items:
            if isinstance(item, dict | list | tuple | set) or item is None:
                notices.append(f"{key}: an alias must be a name, not {type(item).__name__}")
                continue
            alias = " ".join(str(item).split())
            if alias and alias not in out:
                out.append(alias)
        break
    return out


_LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]+)*")


def _language(meta: Mapping[str, Any], notices: list[str]) -> str | None:
    """Frontmatter `lang` or `language` as a primary language subtag ("pt-BR" -> "pt")."""
    for key in ("lang", "language"):
        value = meta.get(key)
        if value is None:
            continue
        if isinstance(value, str) and _LANGUAGE_TAG.fullmatch(value.strip()):
            return re.split(r"[-_]", value.strip())[0].lower()
        notices.append(f"{key}: not a language tag (en, de, pt-BR); the language is detected")
    return None


def parse_note(
    text: str,
    path: Path,
    source: str,
    *,
    markdown: bool = True,
    properties: Properties = note_properties.DEFAULTS,
) -> Note:
    """Frontmatter + body of decoded note text; a Markdown body's Obsidian syntax read too."""
    meta, body_start = split_frontmatter(text, path)
    if not text[body_start:].strip():
        raise NoteError(path, "no text after the frontmatter")
    notices: list[str] = []
    tags_value = next(iter(_first(meta, properties["tags"])), (None, None))[1]
    try:
        tags = normalise_tags(tags_value)
    except ValueError as exc:
        raise NoteError(path, str(exc)) from None
    document_date = _date(meta, properties["document_date"], path, source, notices)
    try:
        private = private_flag(meta.get("private"))
    except ValueError as exc:
        raise PrivateFieldError(path, str(exc)) from None
    topic = _topic(meta, properties["topic"], path, notices)
    record = web_record(meta, path) if meta.get("kind") == WEB else None
    aliases = _aliases(meta, properties["aliases"], notices)
    language = _language(meta, notices)
    syntax = obsidian.scan(text, body_start) if markdown else obsidian.Syntax()
    tags = normalise_tags([*tags, *syntax.tags])
    return Note(
        path=path,
        source=source,
        text=text,
        body_start=body_start,
        tags=tuple(with_parents(tags)),
        topic=topic or None,
        document_date=document_date,
        private=private,
        record=record,
        markdown=markdown,
        notice="; ".join(notices) or None,
        aliases=tuple(aliases),
        language=language,
        links=(*obsidian.frontmatter_links(meta), *syntax.links),
        edits=syntax.edits,
    )


def web_record(meta: Mapping[str, Any], path: Path | str) -> dict[str, Any]:
    """The payload fields of a `kind: web` note: its url (http or https), site, author and
    fetched_at; NoteError naming the field that is wrong."""
    url = meta.get("url")
    if not isinstance(url, str) or not url.strip().lower().startswith(("http://", "https://")):
        raise NoteError(path, "a kind: web note needs its url (http:// or https://)")
    record: dict[str, Any] = {"kind": WEB, "url": url.strip()}
    for name in ("site", "author"):
        value = meta.get(name)
        if value is not None:
            if isinstance(value, dict | list):
                raise NoteError(path, f"{name} must be text")
            record[name] = " ".join(str(value).split()) or None
    try:
        record["fetched_at"] = iso_date(meta.get("fetched_at"))
    except ValueError:
        raise NoteError(path, f"fetched_at {shown(meta.get('fetched_at'))} is not a date") from None
    return record


def file_bytes(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file at `path`, opened without following a link (one swapped in
    after the listing's gates looked is refused, not read); NoteError past `max_bytes`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NoteError(path, "symlink (not followed)") from None
        raise
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NoteError(path, "not a regular file")
        if info.st_size > max_bytes:
            raise NoteError(
                path,
                f"too large ({info.st_size:,} bytes > NOTE_MAX_BYTES={max_bytes:,}); split it up",
            )
        return file.read()


def read_note(
    path: Path,
    source: str,
    *,
    max_bytes: int,
    chunk_chars: int = 1500,
    properties: Properties = note_properties.DEFAULTS,
) -> Note:
    """Read and parse the regular file at `path` (never through a link): a `.md`/`.txt` note
    with its frontmatter (`properties`: which keys fill which field, NOTE_PROPERTIES), or another
    kind through its kb.content.formats reader (`chunk_chars`: the chunk size its code readers cut
    to); a canvas's text nodes are Markdown, read for tags and links like a note's body."""
    data = file_bytes(path, max_bytes)
    if source.lower().endswith(NOTE_SUFFIXES):
        text = decode_note(data, path)
        markdown = source.lower().endswith(".md")
        return parse_note(text, path, source, markdown=markdown, properties=properties)
    try:
        parsed = formats.parse(path.name, data, chunk_chars)
    except NoText as exc:
        raise NoTextNote(path, exc.reason) from None
    except FormatError as exc:
        raise NoteError(path, exc.reason) from None
    if not parsed.text.strip():
        raise NoteError(path, "no text to index")
    syntax = obsidian.scan(parsed.text) if parsed.kind == "canvas" else obsidian.Syntax()
    return Note(
        path=path, source=source, text=parsed.text, body_start=0,
        tags=tuple(with_parents(normalise_tags(list(syntax.tags)))), topic=None,
        document_date=parsed.date, kind=parsed.kind, domain=parsed.domain,
        blocks=tuple(parsed.blocks), marks=tuple(parsed.marks), markdown=parsed.markdown,
        notice=parsed.notice, links=(*(Link(f) for f in parsed.links), *syntax.links),
        edits=syntax.edits,
    )  # fmt: skip
