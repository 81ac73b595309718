"""A stored note's text, put back together from its chunks (the dashboard's preview).

Read from the index only, never from the file system: a preview shows what search sees, and
cannot be pointed at a file the index does not know. Each chunk holds its exact text and where
it sits in the file (kb.content.chunking: `char_start`/`char_end`, `line_start`); chunks are laid
out
in file order, overlapping text is shown once, and what no chunk holds (frontmatter, blank
lines between sections) becomes a gap. A note bigger than the budget is cut to a window around
the chunk asked for. As in search results, the stored text (redacted at ingest, kb.content.redact)
is
shown without its invisible characters (kb.core.invisible), counted in `hidden_chars_removed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from kb.core.errors import NoteNotFound
from kb.core.invisible import strip_invisible
from kb.core.schema import CHUNK_INDEX, DELETED_AT, SOURCE
from kb.store.points import Store

MAX_PREVIEW_BYTES = 500_000


@dataclass(frozen=True)
class Segment:
    chunk_index: int
    line_start: int  # 1-based line of the segment's first character in the file
    text: str
    gap_before: bool  # text the index does not hold lies between this and the one before


@dataclass(frozen=True)
class Preview:
    source: str
    title: str | None
    tags: list[str]
    deleted_at: str | None
    segments: list[Segment]
    trimmed: bool  # the note is bigger than the budget: only a window around the hit is shown
    hidden_chars_removed: int = 0  # invisible characters taken out of the title and segments


def preview(
    store: Store, source: str, hit: int | None = None, budget: int = MAX_PREVIEW_BYTES
) -> Preview:
    """The note `source` as the index holds it; NoteNotFound for a name it does not know."""
    payloads = [p for _, p in store.payloads(source) if p.get(SOURCE) == source]
    if not payloads:
        raise NoteNotFound(f"the index holds no note {source!r}")
    first = min(payloads, key=_index)
    segments = layout(payloads)
    kept, trimmed = window(segments, hit, budget)
    title, hidden = strip_invisible(first["title"] if isinstance(first.get("title"), str) else "")
    shown = []
    for segment in kept:  # returned text never carries hidden characters (kb.core.schema.Hit too)
        text, count = strip_invisible(segment.text)
        shown.append(replace(segment, text=text))
        hidden += count
    tags = first.get("tags")
    return Preview(
        source=source,
        title=title or None,
        tags=[t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
        deleted_at=first.get(DELETED_AT) if isinstance(first.get(DELETED_AT), str) else None,
        segments=shown,
        trimmed=trimmed,
        hidden_chars_removed=hidden,
    )


def _index(payload: dict[str, Any]) -> int:
    value = payload.get(CHUNK_INDEX)
    return value if isinstance(value, int) else 0


def _int(payload: dict[str, Any], key: str, default: int) -> int:
    value = payload.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def layout(payloads: Sequence[dict[str, Any]]) -> list[Segment]:
    """Chunks in file order, each cut to the text no earlier chunk showed."""
    ordered = sorted(payloads, key=lambda p: (_int(p, "char_start", 0), _index(p)))
    segments: list[Segment] = []
    shown_to = 0  # file offset just past the text shown so far
    for p in ordered:
        raw = p.get("text")
        text = raw if isinstance(raw, str) else ""
        start = _int(p, "char_start", shown_to)
        line = _int(p, "line_start", 1)
        if start < shown_to:  # overlaps the previous chunk: show only the rest
            cut = min(len(text), shown_to - start)
            line += text.count("\n", 0, cut)
            text, start = text[cut:], start + cut
        if not text:
            continue
        segments.append(Segment(_index(p), line, text, gap_before=start > shown_to))
        shown_to = start + len(text)
    return segments


def window(segments: list[Segment], hit: int | None, budget: int) -> tuple[list[Segment], bool]:
    """All segments when they fit in `budget` bytes, else those around the hit that do."""
    sizes = [len(s.text.encode()) for s in segments]
    if sum(sizes) <= budget:
        return segments, False
    at = next((i for i, s in enumerate(segments) if s.chunk_index == hit), 0)
    lo = hi = at
    used = sizes[at]
    while True:
        grown = False
        for i in (hi + 1, lo - 1):
            if 0 <= i < len(segments) and not lo <= i <= hi and used + sizes[i] <= budget:
                used += sizes[i]
                lo, hi = min(lo, i), max(hi, i)
                grown = True
        if not grown:
            break
    kept = segments[lo : hi + 1]
    if used > budget:  # the hit alone is bigger: cut its text
        kept = [
            Segment(
                kept[0].chunk_index,
                kept[0].line_start,
                _cut(kept[0].text, budget),
                kept[0].gap_before,
            )
        ]
    return kept, True


def _cut(text: str, budget: int) -> str:
    return text.encode()[:budget].decode("utf-8", "ignore")
