"""What a file-format reader returns: the item's readable text and its blocks with locators.

A reader turns one file into `Parsed`: `text` is what the item reads as (the file itself for
text kinds; the extracted text for PDF, Word, HTML, tables and notebooks, which `read_note`
shows), and `blocks` are the spans of `text` that chunking keeps apart, each with a locator
("p. 2", "row 17", "cell 4 [code]"). An empty locator means a line-based span: chunking writes
`L a-b`. No blocks: the text is chunked as Markdown (`markdown`) or plain text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kb.core.kinds import CODE, PROSE  # domains: which collection an item's chunks go to
from kb.core.limits import TooComplex, json_loads

_NEWLINE = re.compile("\n")


class FormatError(Exception):
    """A file its reader cannot turn into text; `reason` says why, for the run's summary."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NoText(FormatError):
    """A file read whole that holds no text (a photo without words): skipped and counted, not
    failed, since most pictures in a vault are such."""


@dataclass(frozen=True)
class Block:
    start: int  # offsets into Parsed.text
    end: int
    locator: str = ""  # "" = line-based: `L a-b` from the chunk's lines
    heading_path: tuple[str, ...] = ()  # context for the embedding (class > method, key)
    code: bool = False  # a long block is cut along lines, not sentences


@dataclass
class Parsed:
    text: str
    kind: str  # prose, table, config, notebook, code
    blocks: list[Block] = field(default_factory=list)
    markdown: bool = False  # no blocks: chunk along Markdown headings
    marks: list[tuple[int, str]] = field(default_factory=list)  # (offset, locator) e.g. ¶ N
    notice: str | None = None  # indexed, but not as well as it could be (shown in the summary)
    links: list[str] = field(default_factory=list)  # files it names (a canvas's file nodes)
    date: str | None = None  # ISO 8601: the date the file says it was written (an HTML meta)

    @property
    def domain(self) -> str:
        return CODE if self.kind in ("code", "notebook") else PROSE


class TextBuilder:
    """Joins pieces into one text, remembering each block's span."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.blocks: list[Block] = []

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def block(
        self, text: str, locator: str, path: tuple[str, ...] = (), code: bool = False
    ) -> None:
        start = self.size
        self.add(text)
        if text.strip():
            self.blocks.append(Block(start, self.size, locator, path, code))

    @property
    def text(self) -> str:
        return "".join(self.parts)


def line_blocks(text: str, starts: Sequence[tuple[int, str, tuple[str, ...]]]) -> list[Block]:
    """Blocks from 0-based starting lines: each runs to the line before the next start; lines
    before the first start form a line-based preamble."""
    offsets = line_offsets(text, 0, len(text))
    bounds = [(0, "", ()), *sorted(starts, key=lambda s: s[0])]
    blocks = []
    for i, (line, locator, path) in enumerate(bounds):
        end_line = bounds[i + 1][0] if i + 1 < len(bounds) else len(offsets) - 1
        begin, end = offsets[min(line, len(offsets) - 1)], offsets[min(end_line, len(offsets) - 1)]
        if text[begin:end].strip():
            blocks.append(Block(begin, end, locator, path))
    return blocks


def decode_text(data: bytes) -> str:
    """File bytes -> text (a UTF-8 byte-order mark dropped), or FormatError saying why not."""
    if not data.strip():
        raise FormatError("empty file")
    nul = data.find(b"\x00")
    if nul != -1:
        raise FormatError(f"contains a NUL byte at offset {nul} (binary or UTF-16 file?)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start]
        raise FormatError(
            f"not UTF-8 text (byte 0x{bad:02x} at offset {exc.start}); save it as UTF-8 "
            "(a legacy or mixed encoding?)"
        ) from None


def line_offsets(text: str, begin: int, end: int) -> list[int]:
    """Where each `\n`-ended line of `text[begin:end]` starts, and `end`."""
    offsets = [begin] + [m.end() for m in _NEWLINE.finditer(text, begin, end) if m.end() < end]
    return [*offsets, end]


def json_with_list(data: bytes, what: str, key: str) -> tuple[dict[str, Any], list[Any]]:
    """A JSON document with a list under `key` (a notebook's cells, a canvas's nodes), or a
    FormatError naming `what` is wrong with it."""
    try:
        document = json_loads(decode_text(data))
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"not a valid {what} (invalid JSON at line {exc.lineno}: {exc.msg})"
        ) from None
    except TooComplex as exc:
        raise FormatError(f"not read: {exc}") from None
    items = document.get(key) if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise FormatError(f"not a valid {what} (no '{key}' list)")
    return document, items
