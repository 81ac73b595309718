"""Invisible characters that can hide instructions in returned text, removed on output.

A note (or anything pasted into one) can carry text a reader never sees but a language model
reads: zero-width characters, bidirectional overrides and isolates that reorder what is shown,
and Unicode tag characters (U+E0000..U+E007F) that spell out ASCII invisibly. `strip_invisible`
removes them from what a search, a browse, `read_note` and the dashboard's preview return and
counts them; stored payloads and the notes on disk are never changed (kb.content.redact looks
through
them with `hidden_spans`, so they cannot split a secret out of its pattern's reach).

Kept, because they are part of visible text: ZWNJ/ZWJ (U+200C/U+200D) between two letters, marks
or symbols outside ASCII (Persian, Indic scripts, emoji sequences such as a family), the tag
sequence of a subdivision flag (a black flag, up to six tag letters or digits, a cancel tag), and
the plain direction marks U+200E/U+200F used inside right-to-left text.
"""

from __future__ import annotations

import re
import unicodedata

_REMOVED = (
    "\u200b"  # zero width space
    "\u2060"  # word joiner
    "\ufeff"  # zero width no-break space (BOM)
    "\u202a-\u202e"  # bidirectional embeddings and overrides (LRE RLE PDF LRO RLO)
    "\u2066-\u2069"  # bidirectional isolates (LRI RLI FSI PDI)
    "\U000e0000-\U000e007f"  # tag characters
)
_FLAG = "\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,6}\U000e007f"
_PATTERN = re.compile(f"({_FLAG})|([{_REMOVED}])|([\u200c\u200d])")


def _joins(char: str) -> bool:
    """Whether ZWNJ/ZWJ next to `char` can be part of visible text."""
    if char.isascii() or char.isspace():
        return False
    category = unicodedata.category(char)
    return category[0] in "LM" or category in ("So", "Sk")


def hidden_spans(text: str) -> list[tuple[int, int]]:
    """Where `text` holds the characters `strip_invisible` removes: (start, end) of each."""
    spans = []
    for match in _PATTERN.finditer(text):
        if match.group(1):  # a subdivision flag (England, Scotland, Wales)
            continue
        start, end = match.span()
        inside = start > 0 and end < len(text)
        if match.group(3) and inside and _joins(text[start - 1]) and _joins(text[end]):
            continue
        spans.append((start, end))
    return spans


def strip_invisible(text: str) -> tuple[str, int]:
    """`text` without invisible characters that can hide instructions, and how many went."""
    spans = hidden_spans(text)
    if not spans:
        return text, 0
    kept, cursor = [], 0
    for start, end in spans:
        kept.append(text[cursor:start])
        cursor = end
    kept.append(text[cursor:])
    return "".join(kept), len(spans)
