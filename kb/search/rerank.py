"""The second stage of search: the embedder's cross-encoder reads the query with each of the
first stage's best passages and reorders them (docs/design/reranking.md).

`rerank` takes a list of Hits and returns a list of Hits, whatever produced them (the notes'
fused ranking today; several collections merged by rank later): each keeps its first-stage
`score` and gains `rerank_score` (0..1). A reranker that is off, loading, down or slow never
fails a search: the first-stage order stands, and `Reranked.note` says why when it matters.
Searches run it through kb.search.search (kb/search/entry.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from kb.core.errors import RERANK_DISABLED, RERANK_FAILED, EmbedError
from kb.core.schema import Hit

if TYPE_CHECKING:
    from kb.embedding.client import EmbedClient

# Reciprocal-rank constant of the blend (RERANK_WEIGHT < 1), as in reciprocal rank fusion.
BLEND_K = 60
DISABLED = RERANK_DISABLED  # the embedder's error code when it serves no reranker


def unloaded(reason: str) -> str:
    """The one line every surface (search notes, status, /health, the dashboard, query.py)
    shows while the configured reranker did not load; `reason` is the embedder's, which says
    how to fix it (e.g. the command that fetches a RERANK_MODEL missing from the cache)."""
    return f"not reranked: {reason}"


@dataclass(frozen=True)
class Reranked:
    hits: list[Hit] = field(default_factory=list)
    reranked: bool = False  # the reranker ordered these hits
    note: str | None = None  # why the first-stage order stands, when the caller should know
    # every candidate the reranker read, in its order (kb.search.explain ranks them)
    candidates: list[Hit] = field(default_factory=list)
    no_good_match: bool | None = None  # kb.search.confidence: nothing relevant was found


def passage(hit: Hit, passage_chars: int) -> str:
    """What the reranker reads of a hit: its title and headings (context the chunk's own text
    may lack), then the text, cut to `passage_chars` (the reranker's cost grows with length)."""
    context = " > ".join(part for part in (hit.title, *hit.heading_path) if part)
    text = f"{context}\n{hit.text}" if context else hit.text
    return text[:passage_chars] or "(empty)"


def order(scores: Sequence[float], weight: float = 1.0) -> list[int]:
    """Indices of the candidates, best first. weight 1: by reranker score (ties keep the first
    stage's order); below 1: by weight/(K + reranker rank) + (1 - weight)/(K + first rank)."""
    by_score = sorted(range(len(scores)), key=lambda i: -scores[i])
    if weight >= 1.0:
        return by_score
    rank = {index: place for place, index in enumerate(by_score)}

    def blended(i: int) -> float:
        return weight / (BLEND_K + rank[i]) + (1.0 - weight) / (BLEND_K + i)

    return sorted(range(len(scores)), key=lambda i: -blended(i))


def rerank(
    client: EmbedClient,
    query: str,
    hits: Sequence[Hit],
    k: int,
    *,
    weight: float = 1.0,
    passage_chars: int = 1200,
    timeout: float = 30.0,
    requested: bool = False,
) -> Reranked:
    """The best `k` of `hits` (first-stage order, best first) by the reranker's relevance.

    `requested`: the caller asked for reranking explicitly, so an embedder that serves no
    reranker is worth a note (by default it is simply the configured state).
    """
    if not hits:
        return Reranked([], reranked=False)
    try:
        scores = client.rerank(query, [passage(h, passage_chars) for h in hits], timeout)
    except EmbedError as exc:
        if exc.code == DISABLED:
            note = (
                "rerank requested, but the embedder serves no reranker (its RERANK_MODEL is "
                "empty): results are in first-stage order"
                if requested
                else None
            )
        elif exc.code == RERANK_FAILED:  # said on every search: nothing else tells the user
            note = unloaded(client.reranker_failure or exc.message)
        else:
            note = f"reranker unavailable ({exc.message}): results are in first-stage order"
        return Reranked(list(hits[:k]), note=note)
    ranked = [replace(hits[i], rerank_score=scores[i]) for i in order(scores, weight)]
    return Reranked(ranked[:k], reranked=True, candidates=ranked)
