"""Why a result came back: its place and score in a semantic and in a keyword search of the same
filters, its place in the first stage and the reranker's, and the alternates that found it.

`ranking_searches` prepares the two single-mode searches of a collection, which kb.search.entry
sends in one batch with the search itself (the query vector is the embedder client's cached
one); `Ranking.place` looks a result up in them. The same rankings feed kb.search.confidence, so
`explain` costs nothing more than the confidence of every search, apart from one search per
alternate phrasing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from kb.core.errors import EmbedError, KeywordIndexMissing
from kb.core.schema import CHUNK_INDEX, SOURCE, Explanation, Hit
from kb.search import query as kb_query
from kb.search.filters import Filters
from kb.search.rerank import BLEND_K

if TYPE_CHECKING:
    from kb.embedding.client import EmbedClient
    from kb.store.points import Search, Store

# what a ranking's hits carry: what `key` reads
RANKED_FIELDS = (SOURCE, CHUNK_INDEX, "domain")
DEPTH = 50  # places looked at in each single-mode ranking: below it a result is "not in the top"

Key = tuple[str, str | None, int | None]


def key(hit: Hit) -> Key:
    return (hit.domain, hit.source, hit.chunk_index)


@dataclass
class Ranking:
    """One single-mode search's results, best first (`missing`: it could not run, e.g. the
    embedder is down for the semantic one)."""

    hits: list[Hit] = field(default_factory=list)
    missing: bool = False

    def place(self, hit: Hit) -> tuple[int | None, float | None]:
        """(1-based place, score) of `hit`'s passage, else of its note's best passage here."""
        for rank, found in enumerate(self.hits, 1):
            if key(found) == key(hit):
                return rank, found.score
        for rank, found in enumerate(self.hits, 1):
            if (found.domain, found.source) == (hit.domain, hit.source):
                return rank, found.score
        return None, None

    @property
    def scores(self) -> list[float]:
        return [h.score for h in self.hits]


@dataclass
class Rankings:
    semantic: Ranking
    keyword: Ranking
    terms: int  # distinct keyword terms of the query (the keyword bonus's scale)


def ranking_searches(
    store: Store,
    client: EmbedClient,
    query: str,
    filters: Filters,
    per_note: int | None,
    depth: int = DEPTH,
) -> tuple[Search | None, Search | None]:
    """The store queries of the semantic and the keyword ranking of `query` in one collection
    (`client`: its own, kb.search.query.for_collection), to send with the search
    (kb.search.entry), each reading only what `Ranking.place` needs.
    None for one that cannot run: the semantic one while the embedder cannot embed (keyword
    search works without it), the keyword one in a collection without keyword vectors."""
    semantic = keyword = None
    try:
        semantic = kb_query.prepare(store, client, query, depth, mode="semantic",
                                    filters=filters, per_note=per_note, pinned=True)  # fmt: skip
        semantic = replace(semantic, fields=RANKED_FIELDS)
    except EmbedError:
        pass
    try:
        keyword = kb_query.prepare(store, client, query, depth, mode="keyword",
                                   filters=filters, per_note=per_note)  # fmt: skip
        keyword = replace(keyword, fields=RANKED_FIELDS)
    except KeywordIndexMissing:  # a collection from before keyword search: semantic still works
        pass
    return semantic, keyword


def rankings(query: str, semantic: list[Hit] | None, keyword: list[Hit] | None) -> Rankings:
    """The two rankings from the hits of `ranking_searches` (None: that one could not run)."""
    return Rankings(
        Ranking(semantic or [], missing=semantic is None),
        Ranking(keyword or [], missing=keyword is None),
        kb_query.keyword_terms(query),
    )


def found_by(
    store: Store,
    client: EmbedClient,
    phrasings: Sequence[tuple[str, str]],
    filters: Filters,
    per_note: int | None,
    k: int,
) -> dict[str, set[Key]]:
    """For each (label, text) phrasing, the passages its own search (in the mode its prefix
    names) has among its best `k`."""
    out: dict[str, set[Key]] = {}
    for label, text in phrasings:
        [(alone, mode)] = kb_query.alternate_modes([text], "hybrid")
        hits = kb_query.search(store, client, alone, k, mode=mode, filters=filters,
                               per_note=per_note)  # fmt: skip
        out[label] = {key(h) for h in hits}
    return out


def explanation(
    hit: Hit,
    ranks: Rankings | None,
    first: Sequence[Hit],
    *,
    reranked: bool,
    weight: float,
    rerank_scores: dict[Key, float],
    found: dict[str, set[Key]],
    filters: Filters,
    collection: str,
    unembedded: bool = False,
    semantic_down: str | None = None,
) -> Explanation:
    """`hit`'s explanation. `first`: the first stage's order; `rerank_scores`: the reranker's
    score of each candidate it read (its rank is its place among them)."""
    semantic_rank = semantic_score = keyword_rank = keyword_score = None
    if ranks is not None:
        semantic_rank, semantic_score = ranks.semantic.place(hit)
        keyword_rank, keyword_score = ranks.keyword.place(hit)
    places = {key(h): (rank, h.score) for rank, h in enumerate(first, 1)}
    fused_rank, first_score = places.get(key(hit), (len(first) + 1, hit.score))
    rerank_rank = blended = None
    rerank_score = rerank_scores.get(key(hit)) if reranked else None
    if rerank_score is not None:
        ordered = sorted(rerank_scores.values(), reverse=True)
        rerank_rank = ordered.index(rerank_score) + 1
        # kb.search.rerank.order: ranks there count from 0
        blended = weight / (BLEND_K + rerank_rank - 1) + (1 - weight) / (BLEND_K + fused_rank - 1)
    return Explanation(
        semantic_rank=semantic_rank,
        semantic_score=_rounded(semantic_score),
        keyword_rank=keyword_rank,
        keyword_score=_rounded(keyword_score),
        fused_rank=fused_rank,
        first_score=round(first_score, 6),
        rerank_rank=rerank_rank,
        rerank_score=_rounded(rerank_score),
        rerank_weight=weight if rerank_score is not None else None,
        blended=_rounded(blended),
        found_by=[label for label, keys in found.items() if key(hit) in keys],
        filters=filters.arguments(),
        collection=collection,
        indexed_at=hit.date_ingested,
        unembedded=unembedded,
        semantic_down=semantic_down,
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
