"""A note's neighbours in its vault: the notes that link to it (backlinks), the notes it links
to, and the notes nearest to it by meaning that are linked neither way (what Smart Connections
users ask for), each marked with why it is related. Shared by the MCP tool `related_notes`,
`query.py --related` and the dashboard's preview.

Read from the index only (kb.ingest.prepare stores each note's resolved `links`): the backlinks
are one filtered scroll, the nearest notes one dense query with the mean of the note's own chunk
vectors (no embedder call: it works while the embedder is down). As in search results, titles,
aliases and link targets are shown without invisible characters (counted), and were redacted
at ingest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kb.core.errors import NoteNotFound
from kb.core.invisible import strip_invisible
from kb.core.schema import ALIASES, LINKS, ORIGIN, TITLE, UNRESOLVED
from kb.search import paths
from kb.store import collection
from kb.store.points import Store
from kb.store.query import linking_to, sources_in, with_unresolved

Why = Literal["backlink", "link", "both", "similar"]
MAX_K = 20
MAX_LINKED = 100  # backlinks and links listed at most, each
MAX_UNRESOLVED = 100  # unresolved links status lists at most


@dataclass(frozen=True)
class RelatedNote:
    source: str
    title: str | None
    why: Why  # links to the note, linked from it, both, or near it by meaning (not linked)
    score: float | None = None  # cosine similarity to the note (similar ones only)


@dataclass(frozen=True)
class Related:
    source: str
    title: str | None
    aliases: list[str]
    notes: list[RelatedNote]  # linked ones first (both, backlinks, links), then similar ones
    unresolved: list[str]  # what its links to notes that are not indexed name
    links_in: int  # notes linking to it (all, where `notes` lists MAX_LINKED)
    links_out: int  # indexed notes it links to
    hidden_chars_removed: int = 0


@dataclass
class _Shown:
    """Strings as they may be returned: invisible characters removed, and counted."""

    removed: int = 0

    def __call__(self, value: object) -> str | None:
        if not isinstance(value, str):
            return None
        text, count = strip_invisible(value)
        self.removed += count
        return text

    def strings(self, value: object) -> list[str]:
        if not isinstance(value, list):
            return []
        return [s for s in (self(v) for v in value) if s]


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def related(store: Store, source: str, k: int = 5) -> Related:
    """The backlinks, links and `k` nearest unlinked notes of the indexed note `source`.

    NoteNotFound when the index holds no live note of that name; ValueError for k outside
    0..MAX_K; CollectionMissing before anything was ingested."""
    if not 0 <= k <= MAX_K:
        raise ValueError(f"k must be between 0 and {MAX_K}, got {k}")
    collection.require(store)
    where = paths.resolve([store], source)  # a folder's note named without the folder's name
    source = where.path
    found = store.notes([TITLE, ALIASES, LINKS, UNRESOLVED], sources_in([source]))
    if not found:
        hint = where.problem or "use a source search_notes gave"
        raise NoteNotFound(f"no indexed note is named {source!r}; {hint}")
    note = found[0]
    shown = _Shown()
    outgoing = _strings(note.get(LINKS))
    incoming = store.notes([TITLE], linking_to([source]))
    back = {str(p["source"]): p.get(TITLE) for p in incoming}
    titles = dict(back)
    if outgoing:
        titles |= {
            str(p["source"]): p.get(TITLE) for p in store.notes([TITLE], sources_in(outgoing))
        }
    notes: list[RelatedNote] = []
    mutual = [s for s in outgoing if s in back]
    groups: list[tuple[Why, list[str]]] = [
        ("both", mutual),
        ("backlink", [s for s in back if s not in mutual]),
        ("link", [s for s in outgoing if s not in mutual]),
    ]
    for why, names in groups:
        notes += [RelatedNote(s, shown(titles.get(s)), why) for s in names[:MAX_LINKED]]
    if k:
        notes += nearest(store, source, k, exclude=[source, *back, *outgoing], shown=shown)
    return Related(
        source=source,
        title=shown(note.get(TITLE)),
        aliases=shown.strings(note.get(ALIASES)),
        notes=notes,
        unresolved=shown.strings(note.get(UNRESOLVED)),
        links_in=len(back),
        links_out=len(outgoing),
        hidden_chars_removed=shown.removed,
    )


def nearest(
    store: Store, source: str, k: int, *, exclude: Sequence[str], shown: _Shown
) -> list[RelatedNote]:
    """The `k` notes whose best chunk is nearest to the mean of `source`'s chunk vectors."""
    vectors = store.dense_vectors(source)
    if not vectors:
        return []
    mean = [sum(column) / len(vectors) for column in zip(*vectors, strict=True)]
    norm = math.sqrt(sum(x * x for x in mean)) or 1.0
    hits = store.query(
        k, dense=[x / norm for x in mean], where=sources_in(sorted(set(exclude)), keep=False),
        per_note=1,
    )  # fmt: skip
    return [
        RelatedNote(h.source, shown(h.title), "similar", round(h.score, 4))
        for h in hits
        if h.source is not None
    ]


@dataclass(frozen=True)
class UnresolvedLink:
    note: str  # the note whose link it is
    origin: str | None
    target: str  # what the link names, as written


def unresolved_links(store: Store, limit: int = MAX_UNRESOLVED) -> tuple[int, list[UnresolvedLink]]:
    """How many links name notes that are not indexed, and the first `limit` of them by note."""
    shown = _Shown()
    total = 0
    listed: list[UnresolvedLink] = []
    for payload in store.notes([ORIGIN, UNRESOLVED], with_unresolved()):
        targets = shown.strings(payload.get(UNRESOLVED))
        total += len(targets)
        for target in targets:
            if len(listed) < limit:
                origin = payload.get(ORIGIN)
                origin = origin if isinstance(origin, str) else None
                listed.append(UnresolvedLink(str(payload.get("source")), origin, target))
    return total, listed
