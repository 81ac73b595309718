"""Split a note's body into chunks of at most MAX_CHARS characters, with locators.

Splitting is done by `semantic-text-splitter` (a maintained Rust splitter): for Markdown it keeps
headings, paragraphs and fenced code blocks whole when they fit, and otherwise falls back to
lines, sentences, words and finally characters; plain text goes paragraph -> line -> sentence ->
word. Each chunk records where it sits in the original file (character offsets and 1-based line
numbers), so results can point at the exact place in a note.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

from semantic_text_splitter import MarkdownSplitter, TextSplitter

from kb.notes import Note

MAX_CHARS = 1500


@dataclass(frozen=True)
class Chunk:
    index: int  # position in the note, from 0
    text: str  # trimmed chunk text, exactly text[char_start:char_end] of the file
    char_start: int  # offsets into the whole file text (frontmatter included)
    char_end: int
    line_start: int  # 1-based, inclusive
    line_end: int


@lru_cache(maxsize=4)
def _splitter(markdown: bool, max_chars: int) -> MarkdownSplitter | TextSplitter:
    return MarkdownSplitter(max_chars) if markdown else TextSplitter(max_chars)


def chunk_text(
    text: str, *, start: int = 0, markdown: bool = True, max_chars: int = MAX_CHARS
) -> list[Chunk]:
    """Chunks of `text[start:]`, with offsets and line numbers relative to the whole `text`."""
    newlines = [m.start() for m in re.finditer("\n", text)]

    def line_of(offset: int) -> int:
        return bisect_right(newlines, offset - 1) + 1

    chunks: list[Chunk] = []
    for offset, piece in _splitter(markdown, max_chars).chunk_indices(text[start:]):
        begin = start + offset
        end = begin + len(piece)
        chunks.append(
            Chunk(
                index=len(chunks),
                text=piece,
                char_start=begin,
                char_end=end,
                line_start=line_of(begin),
                line_end=line_of(end - 1),
            )
        )
    return chunks


def chunk_note(note: Note, max_chars: int = MAX_CHARS) -> list[Chunk]:
    """A note's body (frontmatter excluded) as chunks; `.txt` notes are split as plain text."""
    markdown = not note.source.lower().endswith(".txt")
    return chunk_text(note.text, start=note.body_start, markdown=markdown, max_chars=max_chars)


def embedding_text(chunk: Chunk, note: Note) -> str:
    """What gets embedded for a chunk: the note's topic sentence, then the chunk.

    The topic gives every chunk of a note the note's context; the stored text stays the chunk.
    """
    return f"{note.topic}\n\n{chunk.text}" if note.topic else chunk.text
