"""Read an indexed item's text around a search hit: `read_note` (MCP) and `query.py --show`.

Only items the index knows are read: the source is looked up in the collections first (never
taken as a path), and a soft-deleted item is refused. Its file is then checked as it is now by
the gates of the listing that indexed it (kb.sources.files through its source's `file_now`: no
link, no hidden or git-ignored path, no secrets file, a kind INDEX_EXTENSIONS indexes, a
regular file inside the inbox's ingested/ or its NOTE_FOLDERS folder), read without following
a link, and refused when it is private now (`private: true`, a PRIVATE_TAGS tag) or its
frontmatter no longer parses: what ingest would not index is not returned either. Which kind of
source an item is, and how its text is read back, is the kind's (kb.sources.registry).

What is returned gets what search results get: credentials redacted as the index redacts them
(kb.content.redact, a key block's lines kept so line numbers still match the file) and invisible
characters removed and counted (kb.core.invisible). The text is the item's readable text
(kb.content.formats:
a PDF page by page, a table row by row, a notebook cell by cell) with line numbers matching the
`line_start`/`line_end` of its hits; at most MAX_BYTES per call. An item without a file of the
user's (a video, a bookmarked page, a message) is read back from its stored text. The note's
aliases and link counts come from the index, as search results' do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kb.content.redact import redact_text
from kb.core.errors import NoteNotFound
from kb.core.invisible import strip_invisible
from kb.core.schema import ALIASES, LINKS
from kb.search import paths
from kb.sources import registry
from kb.sources.kind import ReadConfig
from kb.store import collection
from kb.store.points import Store

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
    hidden_chars_removed: int = 0  # invisible characters taken out of the lines shown
    aliases: list[str] = field(default_factory=list)  # the note's other names (from the index)
    links_out: int = 0  # indexed notes it links to
    links_in: int = 0  # notes linking to it


def stored_payloads(stores: Sequence[Store], source: str) -> list[dict[str, Any]]:
    """The payloads of an item the index holds; NoteNotFound if none does or it is deleted."""
    return holding(stores, source)[1]


def holding(
    stores: Sequence[Store], source: str, hint: str | None = None
) -> tuple[Store, list[dict[str, Any]]]:
    """The store that holds an item, and its payloads; NoteNotFound as `stored_payloads` (with
    `hint`, kb.search.paths' problem, when none holds it)."""
    for store in stores:
        if collection.info(store) is None:
            continue
        payloads = [payload for _, payload in store.payloads(source)]
        if not payloads:
            continue
        if payloads[0].get("deleted_at"):
            raise NoteNotFound(f"{source} is deleted (restore it first to read it)")
        return store, payloads
    raise NoteNotFound(
        f"no indexed note is named {source!r}; {hint or 'use a source search_notes gave'}"
    )


@lru_cache(maxsize=4)
def shown_lines(text: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """An item's lines as they may be returned (invisible characters removed, then secrets
    redacted: a key block's lines kept), and the characters removed from each. Cached by
    content: paging through a big file redacts it once (seconds for megabytes)."""
    raw = text.split("\n")
    if raw and raw[-1] == "":
        raw.pop()  # the file's last newline ends its last line
    # per line (no hidden character spans lines), then redacted as a whole (a key block does)
    cleaned = [strip_invisible(line) for line in raw]
    if not cleaned:
        return (), ()
    lines = redact_text("\n".join(line for line, _ in cleaned), keep_lines=True).split("\n")
    return tuple(lines), tuple(count for _, count in cleaned)


def read_item(
    config: ReadConfig,
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
    found = paths.resolve(stores, source)  # a folder's note named without the folder's name
    source = found.path
    store, payloads = holding(stores, source, found.problem)
    text = registry.kind_of(payloads[0]).text(config, source, payloads)
    all_lines, hidden_per_line = shown_lines(text)
    shown: list[str] = []
    size = hidden = 0
    truncated = False
    for number in range(start_line, min(len(all_lines), start_line + lines - 1) + 1):
        line = f"{number}\t{all_lines[number - 1]}"
        size += len(line.encode()) + 1
        if size > max_bytes:
            truncated = True
            break
        shown.append(line)
        hidden += hidden_per_line[number - 1]
    end = start_line + len(shown) - 1 if shown else 0
    first = min(payloads, key=lambda p: int(p.get("chunk_index") or 0))
    aliases = [strip_invisible(a) for a in first.get(ALIASES) or [] if isinstance(a, str)]
    links = [t for t in first.get(LINKS) or [] if isinstance(t, str)]
    return Passage(
        source, start_line, end, len(all_lines), "\n".join(shown), truncated,
        hidden + sum(n for _, n in aliases), aliases=[a for a, _ in aliases],
        links_out=len(links), links_in=store.backlink_counts([source]).get(source, 0),
    )  # fmt: skip
