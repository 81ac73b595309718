"""Search across the two collections (prose: COLLECTION, code: CODE_COLLECTION) and merge them
fairly: their scores come from different models and are not comparable, so the merged list is
ordered by reciprocal rank fusion (RRF), which looks at ranks only.

`fuse` takes ranked lists of Hits and returns Hits, so a later stage (a reranker) can run over
the merged list unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, get_args

from kb import search as kb_search
from kb.errors import CollectionMissing
from kb.schema import Hit

if TYPE_CHECKING:
    from kb.embedding import EmbedClient
    from kb.store import Store

Domain = Literal["all", "prose", "code"]
DOMAINS: tuple[str, ...] = get_args(Domain)
RRF_K = 60  # the usual constant: rank 1 scores 1/61, rank 10 1/70 (Cormack et al., 2009)


def fuse(ranked: Sequence[Sequence[Hit]], k: int, constant: int = RRF_K) -> list[Hit]:
    """The `k` best hits of several best-first lists by reciprocal rank fusion: each hit scores
    the sum of 1 / (constant + rank) over the lists it is in; `score` becomes that sum."""
    fused: dict[tuple[str, str | None, int | None], tuple[float, Hit]] = {}
    for hits in ranked:
        for rank, hit in enumerate(hits, 1):
            key = (hit.domain, hit.source, hit.chunk_index)
            score, first = fused.get(key, (0.0, hit))
            fused[key] = (score + 1.0 / (constant + rank), first)
    best = sorted(fused.values(), key=lambda pair: -pair[0])[:k]
    return [replace(hit, score=round(score, 6)) for score, hit in best]


def search_all(
    prose: tuple[Store, EmbedClient],
    code: tuple[Store, EmbedClient],
    query: str,
    k: int = 5,
    *,
    domain: Domain = "all",
    **options: Any,
) -> list[Hit]:
    """kb.search.search over the prose collection, the code collection, or both (`all`, fused
    by `fuse` when both have hits; the prose hits as they are while no code is indexed).
    `options` are kb.search.search's. CollectionMissing for `code` before any code is ingested."""
    if domain not in DOMAINS:
        raise ValueError(f"domain must be one of {', '.join(DOMAINS)}, got {domain!r}")
    if domain == "prose":
        return kb_search.search(*prose, query, k, **options)
    if domain == "code":
        try:
            return kb_search.search(*code, query, k, **options)
        except CollectionMissing as exc:
            raise CollectionMissing(
                f"{exc}; no code is indexed yet: code files and notebooks go to it"
            ) from None
    try:
        code_hits = kb_search.search(*code, query, k, **options)
    except CollectionMissing:
        code_hits = []
    try:
        prose_hits = kb_search.search(*prose, query, k, **options)
    except CollectionMissing:
        if not code_hits:
            raise
        prose_hits = []
    if not code_hits or not prose_hits:
        return prose_hits or code_hits
    return fuse([prose_hits, code_hits], k)
