"""How a search is put to Qdrant: payload filters, and the dense and keyword prefetches of one
Query API request with the fusion that merges them. kb.store.points sends it to its engine.
Every qdrant-client model kb.store builds is built here or there: callers pass plain values.

Fusions (`Fusion`): hybrid search uses `bonus` (HYBRID_FUSION, see `fusion`); `rrf` (plain
reciprocal rank fusion, 1 / (60 + rank)) and `dbsf` (Qdrant's distribution-based score fusion)
are the references bench/retrieval.py measures it against. All three run inside Qdrant, so a
server and the embedded engine rank alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from kb.core.schema import (
    CHUNK_INDEX,
    DELETED_AT,
    DELETED_CAUSE,
    DENSE,
    EMBEDDING,
    FOLDERS,
    INBOX,
    KEYWORD,
    KIND,
    LINKS,
    NOTE,
    ORIGIN,
    PENDING,
    SOURCE,
    TAGS,
    TITLE,
    UNRESOLVED,
    KeywordVector,
)
from kb.store.models import models

# Hybrid score = cosine + w * S / (S + KEYWORD_HALF * n), S the chunk's BM25 score, n the number
# of distinct query terms, w KEYWORD_WEIGHT (LOOKUP_WEIGHT for a lookup query): see `fusion`.
KEYWORD_WEIGHT = 1.0  # the most a keyword match adds (a cosine ranges over -1..1)
LOOKUP_WEIGHT = 2.0  # the same for a lookup query (identifiers, codes: nothing to mean)
KEYWORD_HALF = 6.0  # BM25 per query term at which the keyword bonus is half its weight
# The cosine's weight for a query in a language the embedding model does not cover
# (kb.embedding.languages.uncovered): its cosines are noise there, so the keyword ranking decides
# and the cosine only breaks its ties and orders what the keyword side did not find
# (bench/README.md, multilingual: at 0.1 a close cosine still outweighed a keyword match in
# Spanish and Japanese, at 0.05 to 0.005 in traditional Chinese).
UNCOVERED_WEIGHT = 0.001
Fusion = Literal["bonus", "rrf", "dbsf"]
FUSIONS: tuple[str, ...] = get_args(Fusion)
HYBRID_FUSION: Fusion = "bonus"  # what hybrid search uses: docs/design/search.md says why
# Qdrant's RRF scores w / (rank + w * (k - 1)) (rank from 1): k=61 is the textbook
# 1 / (60 + rank). Its exact ties come out in a different order in each process; a keyword
# weight a hair below 1 orders them the same way every time, and changes nothing else. As the
# weight scales the keyword rank (1 / (rank / w + k - 1)), a tie between two points found by
# one ranking each goes to the dense one, and one between points both rankings found (first
# and second, second and first) to the one the keyword ranking placed first.
REFERENCE_RRF_K = 61
REFERENCE_RRF_WEIGHTS = [1.0, 0.9999]
# Candidates each prefetch hands to fusion: a few times what is asked for, never fewer than this.
PREFETCH_MIN = 100
PREFETCH_FACTOR = 4


@dataclass(frozen=True)
class DateRange:
    """`field` between `start` (inclusive) and `end` (inclusive, or exclusive when
    `end_exclusive`); naive datetimes are UTC, as Qdrant reads naive payload dates."""

    field: str
    start: datetime | None = None
    end: datetime | None = None
    end_exclusive: bool = False


def payload_filter(
    *,
    tags_any: Sequence[str] = (),
    tags_all: Sequence[str] = (),
    dates: Sequence[DateRange] = (),
    path: str | None = None,
    kind: str | None = None,
    keywords: Sequence[tuple[str, str]] = (),
    numbers: Sequence[tuple[str, int | None, int | None]] = (),
) -> models.Filter | None:
    """Points matching every given condition (None: no condition). Tags are normalised already;
    `path` is a folder (`recipes`, any depth below it) or one note (`recipes/kimchi.md`); `kind`
    is "note" or "video"; `keywords` are (field, value) exact matches, `numbers` (field, least,
    most) inclusive ranges (a point without the field matches none)."""
    must: list[models.Condition] = []
    if kind is not None:
        must.append(kind_condition(kind))
    must.extend(
        models.FieldCondition(key=key, match=models.MatchValue(value=value))
        for key, value in keywords
    )
    for key, least, most in numbers:
        if least is not None or most is not None:
            must.append(models.FieldCondition(key=key, range=models.Range(gte=least, lte=most)))
    if tags_any:
        must.append(models.FieldCondition(key=TAGS, match=models.MatchAny(any=list(tags_any))))
    must.extend(
        models.FieldCondition(key=TAGS, match=models.MatchValue(value=tag)) for tag in tags_all
    )
    for when in dates:
        bounds: dict[str, datetime] = {}
        if when.start is not None:
            bounds["gte"] = when.start
        if when.end is not None:
            bounds["lt" if when.end_exclusive else "lte"] = when.end
        if bounds:
            must.append(models.FieldCondition(key=when.field, range=models.DatetimeRange(**bounds)))
    if path:
        either: list[models.Condition] = [
            models.FieldCondition(key=FOLDERS, match=models.MatchValue(value=path)),
            models.FieldCondition(key=SOURCE, match=models.MatchValue(value=path)),
        ]
        must.append(models.Filter(should=either))
    return models.Filter(must=must) if must else None


def kind_condition(kind: str) -> models.Condition:
    """Points of one kind; "note" includes points written before the field existed."""
    match = models.FieldCondition(key=KIND, match=models.MatchValue(value=kind))
    if kind != NOTE:
        return match
    return models.Filter(
        should=[match, models.IsEmptyCondition(is_empty=models.PayloadField(key=KIND))]
    )


# a point of a note that is not soft-deleted (no `deleted_at`; points written before the field
# existed have none either)
def _live() -> models.Condition:
    return models.IsEmptyCondition(is_empty=models.PayloadField(key=DELETED_AT))


def visible(where: models.Filter | None) -> models.Filter:
    """`where`, and only points of notes that are not soft-deleted: every search and count."""
    return models.Filter(must=[_live()] if where is None else [_live(), where])


def deleted_filter(cause: str | None = None, since: str | None = None) -> models.Filter:
    """Points of soft-deleted notes (of one `deleted_cause`; deleted at or after `since`, ISO)."""
    must: list[models.Condition] = []
    if cause is not None:
        must.append(models.FieldCondition(key=DELETED_CAUSE, match=models.MatchValue(value=cause)))
    if since is not None:
        after = models.DatetimeRange.model_validate({"gte": since})  # ISO text, parsed
        must.append(models.FieldCondition(key=DELETED_AT, range=after))
    return models.Filter(
        must=must, must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key=DELETED_AT))]
    )


def origin_filter(origin: str) -> models.Filter:
    """Every point of one source (`origin`): the inbox's include points written before the field
    existed (they have none)."""
    match = models.FieldCondition(key=ORIGIN, match=models.MatchValue(value=origin))
    if origin != INBOX:
        return models.Filter(must=[match])
    legacy = models.IsEmptyCondition(is_empty=models.PayloadField(key=ORIGIN))
    return models.Filter(should=[match, legacy])


def linking_to(sources: Sequence[str]) -> models.Filter:
    """Points of the notes whose links name any of `sources` (their backlinks)."""
    return models.Filter(
        must=[models.FieldCondition(key=LINKS, match=models.MatchAny(any=list(sources)))]
    )


def sources_in(sources: Sequence[str], *, keep: bool = True) -> models.Filter:
    """Points of these notes (`keep`), or of every other note."""
    condition = models.FieldCondition(key=SOURCE, match=models.MatchAny(any=list(sources)))
    return models.Filter(must=[condition]) if keep else models.Filter(must_not=[condition])


def with_unresolved() -> models.Filter:
    """Points of notes that link to notes that are not indexed."""
    empty = models.IsEmptyCondition(is_empty=models.PayloadField(key=UNRESOLVED))
    return models.Filter(must_not=[empty])


def source_filter(sources: Iterable[str]) -> models.Filter:
    """Every point of these notes (by `source`)."""
    return models.Filter(
        must=[models.FieldCondition(key=SOURCE, match=models.MatchAny(any=list(sources)))]
    )


# the first chunk of a note: every note has exactly one, so filtering on it lists (and counts)
# notes, not chunks
def _first_chunk() -> models.Condition:
    return models.FieldCondition(key=CHUNK_INDEX, match=models.MatchValue(value=0))


def first_chunks(where: models.Filter | None = None) -> models.Filter:
    """The first chunk of every note matching `where`."""
    return models.Filter(must=[_first_chunk()] if where is None else [_first_chunk(), where])


def listing_filter(where: models.Filter | None, order_by: str) -> models.Filter:
    """One row per note matching `where` that a listing ordered by payload field `order_by`
    can place (kb.search.browse): notes without a value are left out, except by title (every
    note has one, and older points may lack the field)."""
    valueless = models.IsEmptyCondition(is_empty=models.PayloadField(key=order_by))
    must: list[models.Condition] = [_first_chunk()] if where is None else [_first_chunk(), where]
    return models.Filter(must=must, must_not=[] if order_by == TITLE else [valueless])


def sparse_vector(vector: KeywordVector) -> models.SparseVector:
    return models.SparseVector(indices=vector.indices, values=vector.values)


# One phrasing of a search: its dense vector, its keyword vector, or both (kb.search.query).
Phrasing = tuple[Sequence[float] | None, KeywordVector | None]


def _searchable(phrasing: Phrasing) -> bool:
    dense, keyword = phrasing
    return dense is not None or (keyword is not None and bool(keyword.indices))


def phrasing_prefetch(
    phrasing: Phrasing, where: models.Filter | None, depth: int, fusion: Fusion = HYBRID_FUSION
) -> models.Prefetch:
    """One phrasing as a prefetch: dense, keyword, or both merged by `fusion` one level down."""
    dense, keyword = phrasing
    if dense is not None and keyword is not None and keyword.indices:
        inner = [
            models.Prefetch(query=query, using=using, filter=where, limit=depth)
            for query, using in ((list(dense), DENSE), (sparse_vector(keyword), KEYWORD))
        ]
        return models.Prefetch(prefetch=inner, query=fused(fusion, keyword), limit=depth)
    if dense is not None:
        return models.Prefetch(query=list(dense), using=DENSE, filter=where, limit=depth)
    assert keyword is not None
    return models.Prefetch(query=sparse_vector(keyword), using=KEYWORD, filter=where, limit=depth)


def request(
    limit: int,
    *,
    dense: Sequence[float] | None,
    keyword: KeywordVector | None,
    where: models.Filter | None,
    per_note: int | None = None,
    alternates: Sequence[Phrasing] = (),
    fusion: Fusion = HYBRID_FUSION,
) -> models.QueryRequest | models.QueryGroupsRequest:
    """One Query API request for a dense query, a keyword query, or both (hybrid: filtered
    prefetches merged by `fusion`, see `fused`); with `per_note`, grouped by note (`source`):
    at most that many points of each.

    `alternates`: more phrasings of the same search (kb.search.query). Each becomes a prefetch of
    its own and reciprocal rank fusion merges their rankings: their scores live on different
    scales (a keyword-only phrasing scores BM25, a hybrid one cosine plus a bonus), their ranks
    do not.
    """
    prefetch: list[models.Prefetch] | None = None
    query: models.QueryInterface
    using: str | None = None
    flt: models.Filter | None = None
    phrasings = [p for p in ((dense, keyword), *alternates) if _searchable(p)]
    if phrasings:
        dense, keyword = phrasings[0]
    if len(phrasings) > 1:
        depth = _depth(limit, per_note)
        prefetch = [phrasing_prefetch(p, where, depth, fusion) for p in phrasings]
        query = models.FusionQuery(fusion=models.Fusion.RRF)
    elif dense is not None and keyword is not None and keyword.indices:
        depth = _depth(limit, per_note)
        prefetch = [
            models.Prefetch(query=vector, using=name, filter=where, limit=depth)
            for vector, name in ((list(dense), DENSE), (sparse_vector(keyword), KEYWORD))
        ]
        query = fused(fusion, keyword)
    elif dense is not None:
        # also hybrid without keyword terms: the fused score would be the cosine alone
        query, using, flt = list(dense), DENSE, where
    elif keyword is not None:
        query, using, flt = sparse_vector(keyword), KEYWORD, where
    else:
        raise ValueError("a search needs a dense vector, a keyword vector, or both")
    if per_note:
        return models.QueryGroupsRequest(
            prefetch=prefetch, query=query, using=using, filter=flt, limit=limit,
            with_payload=True, group_by=SOURCE, group_size=per_note,
        )  # fmt: skip
    return models.QueryRequest(
        prefetch=prefetch, query=query, using=using, filter=flt, limit=limit, with_payload=True
    )


def fused(
    name: Fusion, keyword: KeywordVector
) -> models.FormulaQuery | models.RrfQuery | models.FusionQuery:
    """The query that merges the dense prefetch (first) and the keyword prefetch (second) of
    query vector `keyword` by the fusion `name`."""
    if name == "bonus":
        return fusion(
            keyword.words or len(keyword.indices), lookup=keyword.lookup, semantic=keyword.semantic
        )
    if name == "rrf":
        return models.RrfQuery(rrf=models.Rrf(k=REFERENCE_RRF_K, weights=REFERENCE_RRF_WEIGHTS))
    if name == "dbsf":
        return models.FusionQuery(fusion=models.Fusion.DBSF)
    raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {name!r}")


# The halves of the hybrid score (`fusion`'s `part`): "meaning" is the cosine (and, for a passage
# not embedded yet, the bonus standing in for it), "words" the keyword bonus, "both" their sum.
Part = Literal["both", "meaning", "words"]


def fusion(
    terms: int, *, lookup: bool = False, semantic: float = 1.0, part: Part = "both"
) -> models.FormulaQuery:
    """How hybrid search combines the dense prefetch ($score[0], cosine) and the keyword one
    ($score[1], BM25): cosine + w * S / (S + KEYWORD_HALF * terms), w KEYWORD_WEIGHT, or
    LOOKUP_WEIGHT for a lookup query (`lookup`: only identifiers, codes and acronyms, see
    kb.embedding.keywords.is_lookup). `semantic` scales the cosine: UNCOVERED_WEIGHT for a
    query in a language the embedding model does not cover (kb.search.query.semantic_weight).

    Why not reciprocal rank fusion: RRF counts places in each ranking and ignores how strong a
    match is, so a chunk sharing one incidental word with a paraphrased question ranks level
    with the best match by meaning (on our hand-written notes queries RRF scored paraphrases
    nDCG@10 0.87 against 0.97 for semantic alone, identifiers 0.83 against 0.99 for keyword
    alone). The keyword bonus here saturates with the BM25 score per query term: a chunk
    matching every term well (an identifier, a name, an error code) gains nearly the full
    weight, one incidental word little.

    Why a lookup weighs double: an identifier has no meaning for the embedding to catch, so its
    cosines are noise (`TaxRuleChosen` is closer to a note about tax rules than to the
    catalogue naming it), and at weight 1 that noise outweighed the one note naming it.

    Chosen by its worst case over five development collections of different shapes (Cranfield,
    the notes, code, an Obsidian-style vault, a documentation site; bench/fusion_sweep.py): its
    nDCG@10 is at most 0.010 below the best of keyword, semantic and plain RRF in any
    collection or kind of query, where plain RRF falls 0.15 short (vault paraphrases), DBSF
    0.08, min-max sums 0.08, weighted RRF 0.11, a per-query choice by keyword strength no
    better. A point missing from a prefetch scores 0 there.

    A passage stored by its words alone (payload EMBEDDING = PENDING, kb.ingest.run) has no
    cosine yet: its bonus stands in for it (adding it a second time), so while an index is being
    embedded a note matching the query's words well is not buried under embedded notes that
    merely resemble it, and one sharing an incidental word stays low. Every embedded point's
    score is as above.

    `part`: the whole score, or one half of it (`Part`), which `note_parts` asks for: hybrid
    search ranks a note by its best half of each kind (kb.store.engine.best_per_note).
    """
    bm25 = "$score[1]"
    bonus = models.DivExpression(
        div=models.DivParams(
            left=bm25,
            right=models.SumExpression(sum=[bm25, KEYWORD_HALF * max(terms, 1)]),
            by_zero_default=0.0,
        )
    )
    weight = LOOKUP_WEIGHT if lookup else KEYWORD_WEIGHT
    cosine = "$score[0]" if semantic == 1.0 else models.MultExpression(mult=[semantic, "$score[0]"])
    meaning: list[models.Expression] = [
        cosine,
        models.MultExpression(mult=[unembedded(), bonus]),  # 1 for such a passage, else 0
    ]
    words: list[models.Expression] = [models.MultExpression(mult=[weight, bonus])]
    halves = {"both": [meaning[0], *words, meaning[1]], "meaning": meaning, "words": words}
    return models.FormulaQuery(formula=models.SumExpression(sum=halves[part]))


def by_note(
    per_note: int | None,
    dense: Sequence[float] | None,
    keyword: KeywordVector | None,
    alternates: Sequence[Phrasing],
    fusion: Fusion,
) -> bool:
    """Whether a search ranks notes by `note_parts`: a hybrid search of one phrasing by the
    bonus fusion, grouped by note."""
    return bool(
        per_note
        and dense is not None
        and keyword is not None
        and keyword.indices
        and not alternates
        and fusion == "bonus"
    )


def note_parts(ranked: models.QueryRequest, keyword: KeywordVector) -> list[models.QueryRequest]:
    """The two halves of `ranked`'s hybrid score (`Part`: meaning, then words), each for every
    candidate of its prefetches, with the note name alone: a note's score in hybrid search is
    its best meaning plus its best words (kb.store.engine.best_per_note)."""
    found = ranked.prefetch
    listed = found if isinstance(found, list) else [] if found is None else [found]
    every = sum(p.limit or 0 for p in listed)
    terms = keyword.words or len(keyword.indices)
    return [
        ranked.model_copy(
            update={
                "query": fusion(terms, lookup=keyword.lookup, semantic=keyword.semantic, part=half),
                "limit": every,
                "with_payload": [SOURCE],
            }
        )
        for half in ("meaning", "words")
    ]


def unembedded() -> models.FieldCondition:
    """The passages stored by their words alone, waiting for their dense vector."""
    return models.FieldCondition(key=EMBEDDING, match=models.MatchValue(value=PENDING))


def deepened(
    found: list[models.Prefetch] | models.Prefetch | None, groups: int, least: int
) -> list[models.Prefetch] | None:
    """Prefetches as deep as a server makes those of a grouped query (it multiplies their
    limits by the number of groups asked for), and never shallower than `least`."""
    listed = found if isinstance(found, list) else [] if found is None else [found]
    return [
        p.model_copy(
            update={
                "limit": max((p.limit or 10) * groups, least),
                "prefetch": deepened(p.prefetch, groups, least),
            }
        )
        for p in listed
    ] or None


def ungrouped(
    grouped: models.QueryGroupsRequest, fetch: int, payload: models.WithPayloadInterface
) -> models.QueryRequest:
    """The ranked query that holds a grouped query's groups: its first `fetch` points, with
    prefetches as deep as a server's grouped query makes them (`deepened`), with `payload`
    (which must name the group field): the caller keeps the groups
    (kb.store.engine.best_per_group)."""
    return models.QueryRequest(
        prefetch=deepened(grouped.prefetch, grouped.limit or 10, fetch),
        query=grouped.query,
        using=grouped.using,
        filter=grouped.filter,
        limit=fetch,
        with_payload=payload,
    )


def grouped_depth(limit: int, per_note: int) -> int:
    """Candidates each prefetch of a grouped query gets on a server: `_depth` per group, times
    the groups asked for."""
    return _depth(limit, per_note) * limit


def _depth(limit: int, per_note: int | None) -> int:
    """Prefetch limit: enough candidates for fusion to rank `limit` results.

    A grouped query multiplies prefetch limits by the number of groups on a server (embedded
    Qdrant prefetches the whole collection then), so its limit is per group.
    """
    if per_note:
        return max(PREFETCH_FACTOR * per_note, math.ceil(PREFETCH_MIN / limit))
    return max(PREFETCH_MIN, PREFETCH_FACTOR * limit)
