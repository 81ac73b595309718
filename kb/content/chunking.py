"""Split a note's body into chunks of at most CHUNK_CHARS characters, with locators and context.

Markdown notes are cut along their heading tree first: a section (a heading with everything
under it) that fits in one chunk stays one chunk; one that does not is split into its own text
and its subsections, recursively. Only a single section's own text that is still too long is
packed by `semantic-text-splitter` (a maintained Rust splitter that keeps paragraphs and fenced
code blocks whole when they fit, then falls back to lines, sentences, words, characters). So an
edit to one paragraph changes only the chunks of its own section (and, when the section
outgrows one chunk, how that section is divided), never chunk boundaries elsewhere in the note,
and the embedding cache re-embeds nothing else. Plain text goes paragraph -> line -> sentence
-> word.

Each chunk records where it sits in the file (character offsets, 1-based lines) and its heading
path, so results can be cited. What gets embedded is the chunk with its note's title, heading
path and topic (`embedding_text`); the stored text stays the chunk alone.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import PurePosixPath

from semantic_text_splitter import MarkdownSplitter, TextSplitter

from kb.content import obsidian
from kb.content.formats.base import Block, line_offsets
from kb.content.notes import Note
from kb.content.obsidian import fence_after

CHUNK_CHARS = 1500
# Bump when a change here cuts notes differently: the next ingest rebuilds the index beside the
# one in use and switches to it once complete (kb.ingest.switch), as for a new embedding model.
CHUNKER_VERSION = 1
PATH_SEPARATOR = " > "  # how a heading path reads in embedded text and in query.py

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
# lines that cannot be the text of a setext heading (a `---` under them is a rule, not a heading)
_NOT_PARAGRAPH = re.compile(r" {0,3}(?:[-*+>|]|\d+[.)]|#|`{3}|~{3})|\s*$")


@dataclass(frozen=True)
class Chunk:
    index: int  # position in the note, from 0
    text: str  # trimmed chunk text, text[char_start:char_end] of the file less its %%comments%%
    char_start: int  # offsets into the whole file text (frontmatter included)
    char_end: int
    line_start: int  # 1-based, inclusive
    line_end: int
    # headings the chunk sits under, outermost first (the note's `#` title included), and
    # their levels (1 for `#`)
    heading_path: tuple[str, ...] = ()
    heading_levels: tuple[int, ...] = ()
    locator: str = ""  # where a reader finds it: "p. 2", "row 17", "L 12-40" (see chunk_note)
    # the text embedded instead of `text`, when Obsidian shows it otherwise (links as their shown
    # text, no comments: kb.content.obsidian); None: `text` itself
    embedded: str | None = None


@dataclass(frozen=True)
class Heading:
    level: int  # 1-6
    title: str
    start: int  # offset of the heading's first line in the text
    end: int  # offset just after its last line (setext headings take two)


@lru_cache(maxsize=4)
def _splitter(markdown: bool, chunk_chars: int) -> MarkdownSplitter | TextSplitter:
    return MarkdownSplitter(chunk_chars) if markdown else TextSplitter(chunk_chars)


class _Lines:
    """Offset -> 1-based line number for one text."""

    def __init__(self, text: str) -> None:
        self.newlines = [m.start() for m in re.finditer("\n", text)]

    def of(self, offset: int) -> int:
        return bisect_right(self.newlines, offset - 1) + 1


_Path = tuple[tuple[int, str], ...]  # (level, title) of each enclosing heading


def _make_chunk(index: int, text: str, begin: int, end: int, lines: _Lines, path: _Path) -> Chunk:
    return Chunk(
        index=index,
        text=text[begin:end],
        char_start=begin,
        char_end=end,
        line_start=lines.of(begin),
        line_end=lines.of(end - 1),
        heading_path=tuple(title for _, title in path),
        heading_levels=tuple(level for level, _ in path),
    )


def chunk_text(
    text: str, *, start: int = 0, markdown: bool = True, chunk_chars: int = CHUNK_CHARS
) -> list[Chunk]:
    """Chunks of `text[start:]` packed by the splitter alone (no heading tree, no paths), with
    offsets and line numbers relative to the whole `text`."""
    lines = _Lines(text)
    chunks: list[Chunk] = []
    for offset, piece in _splitter(markdown, chunk_chars).chunk_indices(text[start:]):
        begin = start + offset
        chunks.append(_make_chunk(len(chunks), text, begin, begin + len(piece), lines, ()))
    return chunks


def headings(text: str, start: int = 0, end: int | None = None) -> list[Heading]:
    """ATX (`## Title`) and setext (`Title` over `===`/`---`) headings of `text[start:end]`,
    skipping fenced code blocks (a `# comment` in a shell snippet is not a heading)."""
    end = len(text) if end is None else end
    found: list[Heading] = []
    fence: str | None = None  # the open fence's marker while inside a code block
    candidate: tuple[int, str] | None = None  # a one-line paragraph that a setext line can title
    blank_before = True
    offset = start
    for line in text[start:end].splitlines(keepends=True):
        here, bare = offset, line.rstrip("\r\n")
        offset += len(line)
        after_blank, blank_before = blank_before, not bare.strip()
        previous, candidate = candidate, None
        was_open, fence = fence is not None, fence_after(bare, fence)
        if was_open or fence is not None:
            continue  # inside a code block, or its opening / closing line
        atx = _ATX.fullmatch(bare)
        if atx:
            found.append(Heading(len(atx.group(1)), (atx.group(2) or "").strip(), here, offset))
            continue
        setext = _SETEXT.fullmatch(bare)
        if setext and previous is not None:
            level = 1 if setext.group(1)[0] == "=" else 2
            found.append(Heading(level, previous[1].strip(), previous[0], offset))
            continue
        if after_blank and not _NOT_PARAGRAPH.match(bare):
            candidate = (here, bare)
    return [h for h in found if h.title]


def _has_headings(note: Note) -> bool:
    """Notes (.md, .txt) and documents read as Markdown (docx, html): `#` lines are headings."""
    return note.kind == "prose" and not note.blocks


def note_title(note: Note) -> str:
    """The note's first level-1 heading, else its file name in words (`kimchi-recipe.md` ->
    `kimchi recipe`)."""
    if not _has_headings(note):  # code, tables, PDF ...: `#` lines are no headings
        return PurePosixPath(note.source).name
    for heading in headings(note.text, note.body_start):
        if heading.level == 1:
            return heading.title
    stem = PurePosixPath(note.source).stem
    return " ".join(re.split(r"[-_\s]+", stem)).strip() or stem


@dataclass
class _Section:
    heading: Heading | None  # None: the note's root
    start: int  # where the section starts (its heading line)
    end: int = 0  # end of the section with all its subsections
    children: list[_Section] = field(default_factory=list)

    @property
    def own_end(self) -> int:
        """End of the section's own text (before its first subsection)."""
        return self.children[0].start if self.children else self.end


def _section_tree(text: str, start: int, found: list[Heading]) -> _Section:
    root = _Section(None, start, len(text))
    stack = [root]
    for heading in found:
        while stack[-1].heading is not None and stack[-1].heading.level >= heading.level:
            stack.pop().end = heading.start
        section = _Section(heading, heading.start)
        stack[-1].children.append(section)
        stack.append(section)
    for section in stack[1:]:
        section.end = len(text)
    return root


def _trim(text: str, begin: int, end: int) -> tuple[int, int]:
    piece = text[begin:end]
    return begin + len(piece) - len(piece.lstrip()), begin + len(piece.rstrip())


class _Builder:
    def __init__(self, text: str, chunk_chars: int) -> None:
        self.text = text
        self.chunk_chars = chunk_chars
        self.lines = _Lines(text)
        self.chunks: list[Chunk] = []

    def _trimmed(self, begin: int, end: int) -> tuple[int, int]:
        return _trim(self.text, begin, end)

    def emit(self, begin: int, end: int, path: _Path, body: int | None = None) -> None:
        """Chunks of `text[begin:end]`; `body` is where the text after its heading(s) starts."""
        begin, end = self._trimmed(begin, end)
        if begin >= end:
            return
        spans = [(begin, end)]
        if end - begin > self.chunk_chars:
            # The heading goes with the start of its text, not into a chunk of its own: the
            # text is packed into pieces that leave the first one room for it.
            lead = self._trimmed(body, end)[0] - begin if body is not None else 0
            if lead >= self.chunk_chars // 2:
                lead = 0  # an absurdly long heading: cut it like any text
            splitter = _splitter(True, self.chunk_chars - lead)
            found = splitter.chunk_indices(self.text[begin + lead : end])
            spans = [(begin + lead + off, begin + lead + off + len(piece)) for off, piece in found]
            spans[0] = (begin, spans[0][1])
        for b, e in spans:
            self.chunks.append(_make_chunk(len(self.chunks), self.text, b, e, self.lines, path))

    def section(self, node: _Section, path: _Path, begin: int) -> None:
        """Chunks of `node`, starting at `begin` (before node.start when it carries along a
        parent heading that has no text of its own)."""
        heading = node.heading
        if heading is not None:
            path = (*path, (heading.level, heading.title))
        lo, hi = self._trimmed(begin, node.end)
        body = heading.end if heading is not None else None
        if hi - lo <= self.chunk_chars or not node.children:
            self.emit(begin, node.end, path, body)
            return
        carry: int | None = None
        if heading is not None and not self.text[heading.end : node.own_end].strip():
            carry = begin  # a bare heading opens the chunk of its first subsection
        else:
            self.emit(begin, node.own_end, path, body)
        for child in node.children:
            self.section(child, path, child.start if carry is None else carry)
            carry = None


def chunk_markdown(text: str, *, start: int = 0, chunk_chars: int = CHUNK_CHARS) -> list[Chunk]:
    """Chunks of the Markdown `text[start:]` cut along its heading tree (see the module doc)."""
    root = _section_tree(text, start, headings(text, start))
    # a note that is one top heading with everything under it: that heading is the root
    while len(root.children) == 1 and not text[root.start : root.children[0].start].strip():
        only = root.children[0]
        only.start = root.start
        root = only
    builder = _Builder(text, chunk_chars)
    builder.section(root, (), root.start)
    return builder.chunks


def chunk_note(note: Note, chunk_chars: int = CHUNK_CHARS) -> list[Chunk]:
    """A note's body (frontmatter excluded) as chunks, each with its locator: the blocks of
    other file kinds (kb.content.formats) kept apart; code and config without blocks in line
    windows;
    `.txt` notes split as plain text; Markdown along its headings. A chunk of Obsidian syntax
    gets its `embedded` text; one that shows nothing (a `%%comment%%` block) is left out."""
    if note.tail:  # a Markdown head, then blocks (a video's description, then its captions)
        head = note.text[: note.tail[0].start]
        chunks = chunk_markdown(head, start=note.body_start, chunk_chars=chunk_chars)
        chunks += chunk_blocks(note.text, note.tail, chunk_chars)
    elif note.blocks:
        chunks = chunk_blocks(note.text, note.blocks, chunk_chars)
    elif note.kind in ("code", "config"):
        chunks = line_windows(note.text, 0, len(note.text), chunk_chars)
    elif not note.markdown or note.source.lower().endswith(".txt"):
        chunks = chunk_text(
            note.text, start=note.body_start, markdown=False, chunk_chars=chunk_chars
        )
    else:
        chunks = chunk_markdown(note.text, start=note.body_start, chunk_chars=chunk_chars)
    if note.edits:  # Obsidian syntax: embed what Obsidian shows; a chunk showing nothing goes
        shown = [obsidian.apply(note.text, note.edits, c.char_start, c.char_end) for c in chunks]
        chunks = [  # and store it without its comments
            replace(c, embedded=text.strip(),
                    text=obsidian.without_comments(note.text, note.edits, c.char_start,
                                                   c.char_end).strip())
            for c, text in zip(chunks, shown, strict=True) if text.strip()
        ]  # fmt: skip
    return [
        replace(c, index=i, locator=c.locator or _locator(c, note)) for i, c in enumerate(chunks)
    ]


def _locator(chunk: Chunk, note: Note) -> str:
    """A docx paragraph (`Heading, ¶ 4`), a Markdown heading path, else the lines `L a-b`."""
    section = PATH_SEPARATOR.join(chunk.heading_path)
    if note.marks:
        inside = [label for at, label in note.marks if chunk.char_start <= at < chunk.char_end]
        before = [label for at, label in note.marks if at <= chunk.char_start]
        label = (inside or before[-1:] or [""])[0]
        return ", ".join(part for part in (section, label) if part)
    if section and note.markdown and note.kind == "prose":
        return section
    return f"L {chunk.line_start}-{chunk.line_end}"


WINDOW_OVERLAP = 3  # lines a window repeats from the one before: a statement cut is seen whole


def line_windows(text: str, begin: int, end: int, chunk_chars: int) -> list[Chunk]:
    """`text[begin:end]` as windows of whole lines up to `chunk_chars`, each repeating the last
    WINDOW_OVERLAP lines of the one before; a single longer line is cut by the splitter."""
    lines = _Lines(text)
    starts = line_offsets(text, begin, end)
    chunks: list[Chunk] = []
    first = 0
    while first < len(starts) - 1:
        last = first + 1
        while last < len(starts) - 1 and starts[last + 1] - starts[first] <= chunk_chars:
            last += 1
        b, e = _trim(text, starts[first], starts[last])
        if e - b > chunk_chars:  # one very long line
            for piece in chunk_text(text[:e], start=b, markdown=False, chunk_chars=chunk_chars):
                chunks.append(piece)
        elif b < e:
            chunks.append(_make_chunk(len(chunks), text, b, e, lines, ()))
        if last >= len(starts) - 1:
            break
        first = max(first + 1, last - WINDOW_OVERLAP)
    return chunks


def chunk_blocks(text: str, blocks: Sequence[Block], chunk_chars: int = CHUNK_CHARS) -> list[Chunk]:
    """One chunk per block (a row, a cell, a page, a function); a block longer than `chunk_chars`
    is cut (code along lines, prose by the splitter), its pieces keeping the block's locator."""
    lines = _Lines(text)
    chunks: list[Chunk] = []
    for block in blocks:
        b, e = _trim(text, block.start, block.end)
        if b >= e:
            continue
        if e - b <= chunk_chars:
            pieces = [_make_chunk(0, text, b, e, lines, ())]
        elif block.code:
            pieces = line_windows(text, b, e, chunk_chars)
        else:
            pieces = chunk_text(text[:e], start=b, markdown=False, chunk_chars=chunk_chars)
        chunks += [
            replace(p, heading_path=block.heading_path, locator=block.locator) for p in pieces
        ]
    return chunks


def context_lines(chunk: Chunk, note: Note, title: str | None = None) -> list[str]:
    """What an embedding of the chunk needs besides its text: the note's title and the chunk's
    heading path (`Kimchi > Fermenting`; headings the chunk's text shows are left out), the
    note's aliases and its topic sentence."""
    path = list(chunk.heading_path)
    if not chunk.heading_levels or chunk.heading_levels[0] != 1:
        # not under a `#` heading of its own: the note's title says what it belongs to
        path.insert(0, note_title(note) if title is None else title)
    shown = {h.title for h in headings(chunk.text)} if _has_headings(note) else set()
    while path and path[-1] in shown:
        path.pop()  # the chunk starts with these headings already
    lines = [PATH_SEPARATOR.join(path)] if path else []
    if note.aliases:  # other names of the note: a search by one of them finds it
        lines.append(", ".join(note.aliases))
    if note.topic:
        lines.append(note.topic)
    if note.edits:  # a heading's links and marks read as Obsidian shows them
        lines = [obsidian.clean(line) for line in lines]
    return lines


def embedding_text(chunk: Chunk, note: Note, title: str | None = None) -> str:
    """What gets embedded (dense and keyword vectors) for a chunk: its context lines, a blank
    line, then the chunk. Deep chunks thus carry what their note and section are about, while
    the stored text stays the chunk alone. Pass `title` (from `note_title`) to skip re-reading it
    for every chunk of a note."""
    context = context_lines(chunk, note, title)
    text = chunk.text if chunk.embedded is None else chunk.embedded
    return "\n".join(context) + "\n\n" + text if context else text
