"""Source code in other languages -> syntax-aware chunks (semantic-text-splitter's CodeSplitter
with the language's own tree-sitter wheel: grammars ship in the wheels, nothing is fetched at
run time), located by lines (`L a-b`); a language without a grammar is cut into line windows
with overlap by chunking."""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Any

from semantic_text_splitter import CodeSplitter

from kb.content.formats.base import Block, Parsed, decode_text

# suffix -> (module, function giving its tree-sitter language)
GRAMMARS: dict[str, tuple[str, str]] = {
    ".js": ("tree_sitter_javascript", "language"),
    ".jsx": ("tree_sitter_javascript", "language"),
    ".mjs": ("tree_sitter_javascript", "language"),
    ".ts": ("tree_sitter_typescript", "language_typescript"),
    ".tsx": ("tree_sitter_typescript", "language_tsx"),
    ".go": ("tree_sitter_go", "language"),
    ".rs": ("tree_sitter_rust", "language"),
    ".java": ("tree_sitter_java", "language"),
    ".c": ("tree_sitter_c", "language"),
    ".h": ("tree_sitter_c", "language"),
    ".cpp": ("tree_sitter_cpp", "language"),
    ".cc": ("tree_sitter_cpp", "language"),
    ".hpp": ("tree_sitter_cpp", "language"),
    ".sh": ("tree_sitter_bash", "language"),
    ".bash": ("tree_sitter_bash", "language"),
}


@lru_cache(maxsize=32)
def _splitter(suffix: str, chunk_chars: int) -> Any:
    module, function = GRAMMARS[suffix]
    try:
        language = getattr(importlib.import_module(module), function)()
    except ImportError:
        return None  # grammar wheel not installed: line windows
    return CodeSplitter(language, chunk_chars)


def read(data: bytes, suffix: str, chunk_chars: int) -> Parsed:
    text = decode_text(data)
    splitter = _splitter(suffix, chunk_chars) if suffix in GRAMMARS else None
    if splitter is None:
        return Parsed(text, "code")
    blocks = [
        Block(offset, offset + len(piece), code=True)
        for offset, piece in splitter.chunk_indices(text)
    ]
    return Parsed(text, "code", blocks)
