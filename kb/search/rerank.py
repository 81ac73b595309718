"""The second stage of search: the embedder's cross-encoder reads the query with each of the
first stage's best passages and reorders them (docs/reranking.md).

`rerank` takes a list of Hits and returns a list of Hits, whatever produced them (the notes'
fused ranking today; several collections merged by rank later): each keeps its first-stage
`score` and gains `rerank_score` (0..1). A reranker that is off, loading, down or slow never
fails a search: the first-stage order stands, and `Reranked.note` says why when it matters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from kb.core.errors import EmbedError
from kb.core.schema import Hit
from kb.embedding.client import RERANK_DISABLED
from kb.search import query as kb_search
from kb.search.domains import Domain, search_all

if TYPE_CHECKING:
    from kb.embedding.client import EmbedClient
    from kb.store.points import Store

# Reciprocal-rank constant of the blend (RERANK_WEIGHT < 1), as in reciprocal rank fusion.
BLEND_K = 60
DISABLED = RERANK_DISABLED  # the embedder's error code when it serves no reranker


@dataclass(frozen=True)
class RerankConfig:
    """The RERANK_* settings, as plain values (kb.app.backend.rerank_config builds them)."""

    candidates: int  # RERANK_CANDIDATES: first-stage hits the reranker reads
    weight: float  # RERANK_WEIGHT: 1 = the reranker's order alone (`order`)
    max_chars: int  # RERANK_MAX_CHARS: of each passage
    timeout: float  # RERANK_TIMEOUT: seconds before the first-stage order stands


@dataclass(frozen=True)
class Reranked:
    hits: list[Hit] = field(default_factory=list)
    reranked: bool = False  # the reranker ordered these hits
    note: str | None = None  # why the first-stage order stands, when the caller should know


def passage(hit: Hit, max_chars: int) -> str:
    """What the reranker reads of a hit: its title and headings (context the chunk's own text
    may lack), then the text, cut to `max_chars` (the reranker's cost grows with length)."""
    context = " > ".join(part for part in (hit.title, *hit.heading_path) if part)
    text = f"{context}\n{hit.text}" if context else hit.text
    return text[:max_chars] or "(empty)"


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
    max_chars: int = 1200,
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
        scores = client.rerank(query, [passage(h, max_chars) for h in hits], timeout)
    except EmbedError as exc:
        if exc.code == DISABLED:
            note = (
                "rerank requested, but the embedder serves no reranker (its RERANK_MODEL is "
                "empty): results are in first-stage order"
                if requested
                else None
            )
        else:
            note = f"reranker unavailable ({exc.message}): results are in first-stage order"
        return Reranked(list(hits[:k]), note=note)
    ranked = [replace(hits[i], rerank_score=scores[i]) for i in order(scores, weight)]
    return Reranked(ranked[:k], reranked=True)


def search(
    store: Store,
    client: EmbedClient,
    config: RerankConfig,
    query: str,
    k: int = 5,
    *,
    rerank_hits: bool | None = None,
    code: tuple[Store, EmbedClient] | None = None,
    domain: Domain = "all",
    **options: Any,
) -> Reranked:
    """The first stage (kb.search.query.search over `store`; with `code`,
    kb.search.domains.search_all over
    both collections as `domain` says), then the rerank stage over its best `config.candidates`
    (at least `k`): the reranker puts prose and code on one scale.

    `rerank_hits`: None = when the embedder serves a reranker; False = first stage only;
    True = asked for (a note says so when it cannot run). `options` go to kb.search.query.search.
    """

    def first(depth: int) -> list[Hit]:
        if code is None:
            return kb_search.search(store, client, query, depth, **options)
        return search_all((store, client), code, query, depth, domain=domain, **options)

    if rerank_hits is False or (rerank_hits is None and client.reranker_off):
        return Reranked(first(k))  # no reranker to read more than k: fetch only k
    depth = min(kb_search.MAX_K, max(k, config.candidates))
    return rerank(
        client,
        query,
        first(depth),
        k,
        weight=config.weight,
        max_chars=config.max_chars,
        timeout=config.timeout,
        requested=rerank_hits is True,
    )
