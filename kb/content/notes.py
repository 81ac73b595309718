"""Read one note: validate the file, parse its YAML frontmatter, normalise tags, topic and date.

A note is a UTF-8 `.md` or `.txt` file. An optional frontmatter block opens it:

    ---
    tags: [Korean Cuisine, recipes]      # or "korean cuisine, recipes"
    topic: How I make kimchi at home.
    document_date: 2024-03-01
    private: true                        # never embedded or stored (a YAML boolean)
    ---

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
from dataclasses import dataclass, replace
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from kb.content import formats
from kb.content.formats.base import Block, FormatError, decode_text

NOTE_SUFFIXES = formats.TEXT_NOTES  # Markdown and text: frontmatter, heading chunks

# `---` alone on the first line opens the block; `---` or `...` alone on a line closes it.
_OPEN = re.compile(r"---[ \t]*\r?\n")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.MULTILINE)


class NoteError(Exception):
    """A file that cannot be ingested as a note; `reason` says why (no note text in it)."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


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

    @property
    def body(self) -> str:
        return self.text[self.body_start :]


def is_private(note: Note, private_tags: Collection[str]) -> bool:
    """`private: true`, or a tag listed in `private_tags` (PRIVATE_TAGS, both normalised): never
    indexed (kb.ingest.prepare) and never read back (kb.search.read)."""
    return note.private or any(tag in private_tags for tag in note.tags)


def normalise_tag(tag: str) -> str:
    """`"  Korean   Cuisine "` -> `"korean cuisine"` (NFC, lowercased, whitespace collapsed)."""
    return " ".join(unicodedata.normalize("NFC", tag).lower().split())


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
        f"private must be true or false (a YAML boolean, unquoted), not {value!r}; "
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
    raise ValueError(f"document_date {value!r} is not a date (use e.g. 2024-03-01)")


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


def parse_note(text: str, path: Path, source: str) -> Note:
    """Frontmatter + body of decoded note text."""
    meta, body_start = split_frontmatter(text, path)
    if not text[body_start:].strip():
        raise NoteError(path, "no text after the frontmatter")
    try:
        tags = normalise_tags(meta.get("tags"))
        document_date = iso_date(meta.get("document_date"))
    except ValueError as exc:
        raise NoteError(path, str(exc)) from None
    try:
        private = private_flag(meta.get("private"))
    except ValueError as exc:
        raise PrivateFieldError(path, str(exc)) from None
    topic = meta.get("topic")
    if isinstance(topic, dict | list):
        raise NoteError(path, "topic must be one sentence of text")
    topic = " ".join(str(topic).split()) if topic is not None else ""
    return Note(
        path=path,
        source=source,
        text=text,
        body_start=body_start,
        tags=tuple(tags),
        topic=topic or None,
        document_date=document_date,
        private=private,
    )


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


def read_note(path: Path, source: str, *, max_bytes: int, max_chars: int = 1500) -> Note:
    """Read and parse the regular file at `path` (never through a link): a `.md`/`.txt` note
    with its frontmatter, or another kind through its kb.content.formats reader (`max_chars`: the
    chunk
    size its code readers cut to)."""
    data = file_bytes(path, max_bytes)
    if source.lower().endswith(NOTE_SUFFIXES):
        note = parse_note(decode_note(data, path), path, source)
        return replace(note, markdown=source.lower().endswith(".md"))
    try:
        parsed = formats.parse(path.name, data, max_chars)
    except FormatError as exc:
        raise NoteError(path, exc.reason) from None
    if not parsed.text.strip():
        raise NoteError(path, "no text to index")
    return Note(
        path=path, source=source, text=parsed.text, body_start=0, tags=(), topic=None,
        document_date=None, kind=parsed.kind, domain=parsed.domain,
        blocks=tuple(parsed.blocks), marks=tuple(parsed.marks), markdown=parsed.markdown,
        notice=parsed.notice,
    )  # fmt: skip
