"""A definition question is answered by the beginning of the note it names.

"what is a canvas" finds the note titled Canvas, but search shows a note by its best chunk, and
that can be any part of it ("Add cards"); a note introduces its subject in its first lines. So
when a question asks what X is and a result's note is titled X (the same terms, as keyword
search reads them), that result shows the note's first chunk; its rank, score and confidence
stay the ones search gave it (bench/passages.py measures which passage a question is shown).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from kb.core.kinds import PROSE
from kb.core.schema import NOTE, Hit
from kb.embedding.keywords import tokenize
from kb.store.points import Store
from kb.store.query import first_chunks, source_filter

DEFINITION = re.compile(
    r"^\s*(?:what\s+(?:is|are)|what['\u2019]?s|define|definition\s+of|meaning\s+of)\s+"
    r"(?:an?\s+|the\s+)?(?P<subject>[^?]+?)\s*\??\s*$",
    re.IGNORECASE,
)
MAX_SUBJECT_WORDS = 4  # longer, it is a question about something, not a name


def subject(query: str) -> str | None:
    """X of a definition question ("what is X", "what's X", "define X"), or None."""
    found = DEFINITION.match(query)
    if found is None or len(found.group("subject").split()) > MAX_SUBJECT_WORDS:
        return None
    return found.group("subject")


def names(subject: str, title: str) -> bool:
    """Whether `title` is `subject` as keyword search reads both (`Workflows`, `a workflow`)."""
    terms = set(tokenize(subject))
    return bool(terms) and terms == set(tokenize(title))


def with_leads(store: Store, query: str, hits: Sequence[Hit]) -> list[Hit]:
    """`hits`, each note the definition question `query` names shown by its first chunk (one
    read of `store`, the notes' collection, only when some result is such a note)."""
    asked = subject(query)
    named = [
        h.source
        for h in hits
        if asked
        and h.kind == NOTE
        and h.domain == PROSE
        and h.source
        and h.chunk_index
        and names(asked, h.title or "")
    ]
    if not named:
        return list(hits)
    found = store.browse(first_chunks(source_filter(named)), order_by="title", limit=len(named))
    leads = {h.source: h for h in found}
    return [_shown_by(leads[h.source], h) if h.source in leads else h for h in hits]


def _shown_by(lead: Hit, hit: Hit) -> Hit:
    """`hit` as search ranked and judged it, showing its note's first chunk `lead`."""
    return replace(
        lead,
        score=hit.score,
        rerank_score=hit.rerank_score,
        confidence=hit.confidence,
        explain=hit.explain,
    )
