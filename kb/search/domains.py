"""Search across the two collections (prose: COLLECTION, code: CODE_COLLECTION) and merge them
fairly: their scores come from different models and are not comparable, so the merged list is
ordered by reciprocal rank fusion (RRF), which looks at ranks only.

`fuse` takes ranked lists of Hits and returns Hits, so a later stage (a reranker) can run over
the merged list unchanged.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Literal, get_args

from kb.core.errors import CollectionMissing
from kb.core.schema import Hit
from kb.search import query as kb_search
from kb.search.filters import Filters
from kb.store.query import HYBRID_FUSION, Fusion

if TYPE_CHECKING:
    from kb.embedding.client import EmbedClient
    from kb.store.points import Store

Domain = Literal["all", "prose", "code"]
DOMAINS: tuple[str, ...] = get_args(Domain)
RRF_K = 60  # the usual constant: rank 1 scores 1/61, rank 10 1/70 (Cormack et al., 2009)


def _standing(hits: Sequence[Hit]) -> list[float]:
    """How far each hit stands above its own list (z-score of its score within the list): a
    list whose top hit stands out is sure of it, a flat list is not. Scores are compared only
    within one list, where they come from one model."""
    scores = [h.score for h in hits]
    mean = statistics.fmean(scores) if scores else 0.0
    spread = statistics.pstdev(scores) if len(scores) > 1 else 0.0
    return [(s - mean) / spread if spread > 0 else 0.0 for s in scores]


def fuse(ranked: Sequence[Sequence[Hit]], k: int, constant: int = RRF_K) -> list[Hit]:
    """The `k` best hits of several best-first lists by reciprocal rank fusion: each hit scores
    the sum of 1 / (constant + rank) over the lists it is in; `score` becomes that sum. Equal
    sums (the first hits of two lists) go in the order of how far each stands above its own list
    (`_standing`), so a question about code puts the code first and one about notes the notes."""
    fused: dict[tuple[str, str | None, int | None], tuple[float, float, Hit]] = {}
    for hits in ranked:
        for rank, (hit, standing) in enumerate(zip(hits, _standing(hits), strict=True), 1):
            key = (hit.domain, hit.source, hit.chunk_index)
            score, best, first = fused.get(key, (0.0, standing, hit))
            fused[key] = (score + 1.0 / (constant + rank), max(best, standing), first)
    ordered = sorted(fused.values(), key=lambda item: (-round(item[0], 9), -item[1]))[:k]
    return [replace(hit, score=round(score, 6)) for score, _, hit in ordered]


def search_all(
    prose: tuple[Store, EmbedClient],
    code: tuple[Store, EmbedClient],
    query: str,
    k: int = 5,
    *,
    domain: Domain = "all",
    mode: kb_search.Mode = "hybrid",
    filters: Filters | None = None,
    per_note: int | None = 1,
    alternates: Sequence[str] = (),
    fusion: Fusion = HYBRID_FUSION,
) -> list[Hit]:
    """kb.search.query.search over the prose collection, the code collection, or both (`all`,
    fused by `fuse` when both have hits; the prose hits as they are while no code is indexed),
    with that function's options. CollectionMissing for `code` before any code is ingested."""

    def one(store: Store, client: EmbedClient) -> list[Hit]:
        return kb_search.search(
            store,
            client,
            query,
            k,
            mode=mode,
            filters=filters,
            per_note=per_note,
            alternates=alternates,
            fusion=fusion,
        )

    return merged(prose, code, one, k, domain)


def merged(
    prose: tuple[Store, EmbedClient],
    code: tuple[Store, EmbedClient],
    one: Callable[[Store, EmbedClient], list[Hit]],
    k: int,
    domain: Domain = "all",
) -> list[Hit]:
    """`one` (a search of one collection) over the collections `domain` names, merged as
    `search_all` says."""
    if domain not in DOMAINS:
        raise ValueError(f"domain must be one of {', '.join(DOMAINS)}, got {domain!r}")
    if domain == "prose":
        return one(*prose)
    if domain == "code":
        try:
            return one(*code)
        except CollectionMissing as exc:
            raise CollectionMissing(
                f"{exc}; no code is indexed yet: code files and notebooks go to it"
            ) from None
    try:  # no code collection, as most have, is no hits and (lately seen) no request
        code_hits = [] if code[0].missing_lately() else one(*code)
    except CollectionMissing:
        code_hits = []
    try:
        prose_hits = one(*prose)
    except CollectionMissing:
        if not code_hits:
            raise
        prose_hits = []
    if not code_hits or not prose_hits:
        return prose_hits or code_hits
    return fuse([prose_hits, code_hits], k)
