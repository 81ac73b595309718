"""Word `.docx` -> Markdown-like text (headings kept), located by heading and paragraph `¶ N`,
with python-docx (`iter_inner_content` keeps paragraphs and tables in document order)."""

from __future__ import annotations

import io
import re
import zipfile

import docx
from docx.opc.exceptions import PackageNotFoundError
from docx.table import Table
from docx.text.paragraph import Paragraph

from kb.content.formats.base import FormatError, Parsed, TextBuilder

_HEADING = re.compile(r"Heading (\d)")


def _level(paragraph: Paragraph) -> int:
    name = paragraph.style.name if paragraph.style is not None else ""
    if name == "Title":
        return 1
    found = _HEADING.fullmatch(name or "")
    return min(int(found.group(1)), 6) if found else 0


def _table(table: Table) -> str:
    return "\n".join(" | ".join(c.text.strip() for c in row.cells) for row in table.rows)


def read(data: bytes) -> Parsed:
    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise FormatError(f"not a valid .docx (corrupt, or not a Word file: {exc})") from None
    out = TextBuilder()
    marks: list[tuple[int, str]] = []
    number = 0
    for part in document.iter_inner_content():
        if isinstance(part, Paragraph):
            text = part.text.strip()
            level = _level(part)
            if not text:
                continue
            if level:
                out.add(f"{'#' * level} {text}\n\n")
                continue
        else:
            text = _table(part)
        number += 1
        marks.append((out.size, f"¶ {number}"))
        out.add(text + "\n\n")
    if not marks and not out.text.strip():
        raise FormatError("no text in the document")
    return Parsed(out.text, "prose", markdown=True, marks=marks)
