"""CSV / TSV -> one chunk per row, `column: value | column: value` (the header named in every
chunk), located as `row N` where the header is row 1, as a spreadsheet shows it.

The readable text has one line per record: line N is row N, so `read_note` lines match.
"""

from __future__ import annotations

import csv
import io

from kb.content.formats.base import FormatError, Parsed, TextBuilder, decode_text


def read(data: bytes, delimiter: str) -> Parsed:
    text = decode_text(data).removeprefix("\ufeff")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        rows = list(reader)
    except csv.Error as exc:
        raise FormatError(f"broken CSV near line {reader.line_num}: {exc}") from None
    if not rows:
        raise FormatError("no rows")
    header = [name.strip() or f"column {i}" for i, name in enumerate(rows[0], 1)]
    out = TextBuilder()
    out.add(" | ".join(header) + "\n")
    for number, row in enumerate(rows[1:], 2):
        names = header + [f"column {i}" for i in range(len(header) + 1, len(row) + 1)]
        cells = [f"{n}: {v.strip()}" for n, v in zip(names, row, strict=False) if v.strip()]
        out.block(" | ".join(" ".join(c.split()) for c in cells), f"row {number}")
        out.add("\n")
    if not out.blocks:
        raise FormatError("a header but no rows with values")
    return Parsed(out.text, "table", out.blocks)
