"""Read an indexed item's text around a search hit: `read_note` (MCP) and `query.py --show`.

Only items the index knows are read: the source is looked up in the collections first (never
taken as a path), a soft-deleted item is refused, and the file is resolved inside its source's
folder (the inbox's ingested/ or its NOTE_FOLDERS folder) and must stay there once links are
resolved, so neither `..` nor a symlink reaches anything else. The text is the item's readable
text (kb.formats: a PDF page by page, a table row by row, a notebook cell by cell) with line
numbers matching the `line_start`/`line_end` of its hits; at most MAX_BYTES per call. A saved
video has no file: its stored text is read instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from kb import collection
from kb.errors import NoteNotFound
from kb.notes import NoteError, read_note
from kb.schema import INBOX, TRANSCRIPT
from kb.settings import Settings
from kb.sources.folder import configured
from kb.sources.inbox import INGESTED
from kb.store import Store

MAX_BYTES = 500_000  # per call: what an assistant's context can take in one go
MAX_LINES = 2000


@dataclass(frozen=True)
class Passage:
    source: str
    start_line: int  # first line shown (1-based)
    end_line: int  # last line shown (0: none)
    total_lines: int
    text: str  # the lines, each as "N<tab>line"
    truncated: bool  # stopped at MAX_BYTES before `lines` lines


def stored_payloads(stores: Sequence[Store], source: str) -> list[dict[str, Any]]:
    """The payloads of an item the index holds; NoteNotFound if none does or it is deleted."""
    for store in stores:
        if collection.info(store) is None:
            continue
        payloads = [payload for _, payload in store.payloads(source)]
        if not payloads:
            continue
        if payloads[0].get("deleted_at"):
            raise NoteNotFound(f"{source} is deleted (restore it first to read it)")
        return payloads
    raise NoteNotFound(f"no indexed note is named {source!r}; use a source search_notes gave")


def video_text(payloads: Sequence[dict[str, Any]]) -> str:
    """A saved video has no file: its text is what the index stored, in chunk order (title and
    link first; a caption passage led by its moment, `[12:34]`)."""
    first = payloads[0]
    lines = [str(first.get("title") or first.get("source")), str(first.get("url") or ""), ""]
    for payload in sorted(payloads, key=lambda p: int(p.get("chunk_index") or 0)):
        moment = (
            f"[{payload.get('locator')}] " if payload.get("heading_path") == [TRANSCRIPT] else ""
        )
        lines += [moment + str(payload.get("text") or ""), ""]
    return "\n".join(lines)


def locate(settings: Settings, source: str, origin: str) -> Path:
    """The file of an indexed item, checked to lie inside its source's folder."""
    parts = PurePosixPath(source).parts
    if not parts or source.startswith("/") or ".." in parts or "\\" in source:
        raise NoteNotFound(f"{source!r} is not a note's name")
    if origin == INBOX:
        root, rel = settings.NOTES_DIR / INGESTED, parts
    else:
        folders = {f.name: f.root for f in configured(settings)}
        if origin not in folders or parts[0] != origin:
            raise NoteNotFound(f"{source}: its folder {origin!r} is no longer in NOTE_FOLDERS")
        root, rel = folders[origin], parts[1:]
    base = root.resolve()
    path = base.joinpath(*rel)
    try:
        real = path.resolve(strict=True)
    except (FileNotFoundError, RuntimeError):
        raise NoteNotFound(f"{source}: its file is gone from {root}") from None
    if not real.is_relative_to(base) or not real.is_file():
        raise NoteNotFound(f"{source}: its file leads outside {root} (a symlink?); not read")
    return real


def read_item(
    settings: Settings,
    stores: Sequence[Store],
    source: str,
    start_line: int = 1,
    lines: int = 200,
    max_bytes: int = MAX_BYTES,
) -> Passage:
    """Lines `start_line`.. of the indexed item `source` (at most `lines` and `max_bytes`)."""
    if start_line < 1:
        raise ValueError(f"start_line must be 1 or more, got {start_line}")
    if not 1 <= lines <= MAX_LINES:
        raise ValueError(f"lines must be between 1 and {MAX_LINES}, got {lines}")
    payloads = stored_payloads(stores, source)
    if payloads[0].get("kind") == "video":
        text = video_text(payloads)
    else:
        path = locate(settings, source, str(payloads[0].get("origin") or INBOX))
        try:
            text = read_note(path, source, max_bytes=settings.NOTE_MAX_BYTES).text
        except NoteError as exc:
            raise NoteNotFound(f"{source}: {exc.reason}") from None
    all_lines = text.split("\n")
    if all_lines and all_lines[-1] == "":
        all_lines.pop()  # the file's last newline ends its last line
    shown: list[str] = []
    size = 0
    truncated = False
    for number in range(start_line, min(len(all_lines), start_line + lines - 1) + 1):
        line = f"{number}\t{all_lines[number - 1]}"
        size += len(line.encode()) + 1
        if size > max_bytes:
            truncated = True
            break
        shown.append(line)
    end = start_line + len(shown) - 1 if shown else 0
    return Passage(source, start_line, end, len(all_lines), "\n".join(shown), truncated)
