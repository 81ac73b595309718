"""File kinds beyond Markdown: one module per kind, each turning a file into readable text and
blocks with locators (kb.content.formats.base). `parse` picks the reader by the file's suffix.

| kind     | suffixes                              | locator            | domain |
| prose    | .md .txt (kb.content.notes) .pdf .docx .html  | heading, p. N, ¶ N | prose  |
| image    | .png .jpg .jpeg .webp .heic (OCR)     | image              | prose  |
| table    | .csv .tsv                             | row N              | prose  |
| config   | .yaml .yml .toml .json .ini           | key, L a-b         | prose  |
| canvas   | .canvas (Obsidian's JSON Canvas)      | group > node ID    | prose  |
| notebook | .ipynb                                | cell N [kind]      | code   |
| code     | .py and other languages               | L a-b              | code   |
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from kb.content.formats import code
from kb.content.formats.base import CODE, PROSE, Block, FormatError, Parsed
from kb.core import kinds

__all__ = ["CODE", "PROSE", "Block", "FormatError", "Parsed", "domain_of", "is_secret", "parse"]

TEXT_NOTES = kinds.TEXT_NOTES  # read by kb.content.notes, with frontmatter


def _reader(module: str, function: str, *args: Any) -> Callable[[bytes, int], Parsed]:
    """A reader imported on first use: scripts that never meet a PDF never load PDFium."""

    def read(data: bytes, chunk_chars: int) -> Parsed:
        found = getattr(importlib.import_module(f"kb.content.formats.{module}"), function)
        return found(data, *args, chunk_chars) if module == "pycode" else found(data, *args)

    return read


_READERS: dict[str, Callable[[bytes, int], Parsed]] = {
    ".pdf": _reader("pdf", "read"),
    ".docx": _reader("word", "read"),
    ".html": _reader("webpage", "read"),
    ".htm": _reader("webpage", "read"),
    ".csv": _reader("table", "read", ","),
    ".tsv": _reader("table", "read", "\t"),
    ".yaml": _reader("config", "read_yaml"),
    ".yml": _reader("config", "read_yaml"),
    ".toml": _reader("config", "read_toml"),
    ".json": _reader("config", "read_json"),
    ".ini": _reader("config", "read_ini"),
    ".canvas": _reader("canvas", "read"),
    **{suffix: _reader("image", "read") for suffix in kinds.IMAGES},
    ".ipynb": _reader("notebook", "read"),
    ".py": _reader("pycode", "read"),
}
CODE_SUFFIXES = tuple(s for s, (reader, _) in kinds.KINDS.items() if reader == "code")
# every row of the kinds table has its reader here, and every reader its row
assert {s for s, (r, _) in kinds.KINDS.items() if r not in ("note", "code")} == set(_READERS)
assert set(code.GRAMMARS) <= set(CODE_SUFFIXES)
KNOWN = kinds.KNOWN
DEFAULT_EXTENSIONS = kinds.DEFAULT_EXTENSIONS
SECRET_FILES = kinds.SECRET_FILES
is_secret = kinds.is_secret
suffix_of = kinds.suffix_of
domain_of = kinds.domain_of


def parse(name: str, data: bytes, chunk_chars: int) -> Parsed:
    """The file `name` (its suffix picks the reader) as readable text and blocks; FormatError
    naming what is wrong with it."""
    suffix = suffix_of(name)
    reader = _READERS.get(suffix)
    if reader is not None:
        return reader(data, chunk_chars)
    if suffix in CODE_SUFFIXES:
        return code.read(data, suffix, chunk_chars)
    raise FormatError(f"no reader for {suffix or 'files without a suffix'}")
