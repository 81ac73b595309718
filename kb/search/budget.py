"""A context budget instead of a fixed k: `pack` fills `result_chars` with the best passages, best
first, and merges the chunks of one note that follow each other into one passage (its line
range spanning them), so a section split over three chunks comes back as one piece of text.

A passage that does not fit is left out and smaller ones after it may still fit; `per_note`
counts passages after merging (1: one stretch of text per note). When not even the best passage
fits, it comes back cut to the budget, its `line_end` where the cut falls.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from kb.core.schema import Hit

MIN_CHARS = 200
MAX_CHARS = 200_000
CANDIDATES = 50  # passages the first stage hands to packing


def check(result_chars: int | None) -> None:
    if result_chars is not None and not MIN_CHARS <= result_chars <= MAX_CHARS:
        raise ValueError(
            f"max_chars must be between {MIN_CHARS} and {MAX_CHARS}, got {result_chars}"
        )


@dataclass
class _Run:
    """Consecutive chunks of one note, each with its rank (0 = the best of the search)."""

    ranked: list[tuple[int, Hit]] = field(default_factory=list)

    @property
    def rank(self) -> int:
        return min(rank for rank, _ in self.ranked)

    @property
    def hits(self) -> list[Hit]:
        return [hit for _, hit in self.ranked]

    @property
    def first(self) -> int:
        return min(h.chunk_index or 0 for h in self.hits)

    @property
    def last(self) -> int:
        return max(h.chunk_index or 0 for h in self.hits)

    def touches(self, hit: Hit) -> bool:
        return hit.chunk_index is not None and self.first - 1 <= hit.chunk_index <= self.last + 1


def joined(hits: Sequence[Hit]) -> str:
    """The texts of consecutive chunks as one, without the lines a chunk repeats from the one
    before (a code window's overlap), told by their character offsets in the file."""
    ordered = sorted(hits, key=lambda h: h.chunk_index or 0)
    text = ordered[0].text
    for before, hit in itertools.pairwise(ordered):
        part = hit.text
        if before.char_end is not None and hit.char_start is not None:
            overlap = before.char_end - hit.char_start
            exact = hit.char_end is not None and hit.char_end - hit.char_start == len(part)
            if 0 < overlap <= len(part) and exact:
                part = part[overlap:]
        text = f"{text}\n{part.lstrip(chr(10))}" if part else text
    return text


def merged(run: _Run) -> Hit:
    """One passage for a run of chunks: the best chunk's fields, the run's text and extent."""
    best = min(run.ranked, key=lambda pair: pair[0])[1]
    if len(run.hits) == 1:
        return best
    ordered = sorted(run.hits, key=lambda h: h.chunk_index or 0)
    starts = [h.line_start for h in ordered if h.line_start is not None]
    ends = [h.line_end for h in ordered if h.line_end is not None]
    locator = best.locator
    if locator.startswith("L ") and starts and ends:
        locator = f"L {min(starts)}-{max(ends)}"
    scores = [h.confidence for h in run.hits if h.confidence is not None]
    return replace(
        best,
        text=joined(ordered),
        chunk_index=ordered[0].chunk_index,
        heading_path=ordered[0].heading_path,
        line_start=min(starts) if starts else None,
        line_end=max(ends) if ends else None,
        char_start=ordered[0].char_start,
        char_end=ordered[-1].char_end,
        locator=locator,
        hidden_chars_removed=sum(h.hidden_chars_removed for h in ordered),
        confidence=max(scores) if scores else None,
    )


def cut(hit: Hit, chars: int) -> Hit:
    """The passage's first `chars` characters, its line range ending where they do."""
    text = hit.text[:chars]
    end = hit.line_start + text.count("\n") if hit.line_start is not None else hit.line_end
    char_end = hit.char_start + len(text) if hit.char_start is not None else hit.char_end
    return replace(hit, text=text, line_end=end, char_end=char_end)


def pack(hits: Sequence[Hit], result_chars: int, per_note: int | None = None) -> list[Hit]:
    """The best passages of `hits` (best first) that fit in `result_chars` characters together."""
    check(result_chars)
    runs: dict[tuple[str, str | None], list[_Run]] = {}
    ordered: list[_Run] = []
    used = 0
    for rank, hit in enumerate(hits):
        note = runs.setdefault((hit.domain, hit.source), [])
        near = [run for run in note if run.touches(hit)]
        if any(hit.chunk_index == h.chunk_index for run in near for h in run.hits):
            continue  # the same chunk twice (it cannot be, but would count twice)
        if near:
            trial = _Run([pair for r in near for pair in r.ranked] + [(rank, hit)])
            before = sum(len(merged(r).text) for r in near)
        elif per_note and len(note) >= per_note:
            continue
        else:
            trial, before = _Run([(rank, hit)]), 0
        grown = used - before + len(merged(trial).text)
        if grown > result_chars:
            continue
        for run in near:
            note.remove(run)
            ordered.remove(run)
        note.append(trial)
        ordered.append(trial)
        used = grown
    if not ordered and hits:
        return [cut(hits[0], result_chars)]
    return [merged(run) for run in sorted(ordered, key=lambda r: r.rank)]
