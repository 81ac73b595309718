"""The first stage of search over one collection (hybrid, semantic or keyword, with filters),
and the tags in use. Callers search through kb.search.search (kb/search/entry.py), which runs it
over the notes and the code collections and then the rerank stage.

Modes: `hybrid` (default) scores each chunk by its cosine similarity plus a keyword (BM25)
bonus, so a paraphrase and an exact identifier, acronym or name are both found (see
kb.store.query.fusion); `semantic` is the dense ranking alone, `keyword` the BM25 ranking
alone. Results are collapsed to `per_note` chunks per note (default 1: ten results are ten
different notes); a hybrid search ranks each note by its best cosine plus its best keyword bonus
(kb.store.engine.best_per_note).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Literal, NamedTuple, get_args

from kb.core.errors import CollectionMissing, EmbedError, StoreError
from kb.core.schema import Hit
from kb.embedding.keywords import query_vector, uncovered
from kb.search.filters import Filters
from kb.store import collection
from kb.store.points import Found, Search, Store
from kb.store.query import FUSIONS, HYBRID_FUSION, UNCOVERED_WEIGHT, Fusion

if TYPE_CHECKING:
    from kb.embedding.client import EmbedClient

__all__ = [
    "MAX_ALTERNATES",
    "MAX_K",
    "MODES",
    "Hit",
    "Mode",
    "TagUsage",
    "alternate_modes",
    "keyword_terms",
    "prepare",
    "search",
    "send",
    "tag_usage",
]

MAX_K = 100
Mode = Literal["hybrid", "semantic", "keyword"]
MODES: tuple[str, ...] = get_args(Mode)
MAX_ALTERNATES = 5
# An alternate phrasing starting with one of these is searched in that mode alone.
ALTERNATE_PREFIXES: dict[str, Mode] = {"keyword:": "keyword", "semantic:": "semantic"}


def alternate_modes(alternates: Sequence[str], mode: Mode) -> list[tuple[str, Mode]]:
    """(text, mode) of each alternate phrasing: `keyword: ...` and `semantic: ...` pick a mode,
    any other follows the search's `mode`. ValueError naming `alternates[i]` when one is empty."""
    if len(alternates) > MAX_ALTERNATES:
        raise ValueError(f"alternates: at most {MAX_ALTERNATES} phrasings, got {len(alternates)}")
    out: list[tuple[str, Mode]] = []
    for index, raw in enumerate(alternates):
        text, own = raw.strip(), mode
        for prefix, prefixed in ALTERNATE_PREFIXES.items():
            if text.lower().startswith(prefix):
                text, own = text[len(prefix) :].strip(), prefixed
        if not text:
            raise ValueError(f"alternates[{index}] is empty")
        out.append((text, own))
    return out


def search(
    store: Store,
    client: EmbedClient,
    query: str,
    k: int = 5,
    *,
    mode: Mode = "hybrid",
    filters: Filters | None = None,
    per_note: int | None = 1,
    alternates: Sequence[str] = (),
    fusion: Fusion = HYBRID_FUSION,
) -> list[Hit]:
    """The `k` best chunks for `query`, at most `per_note` from each note (None or 0: no limit).

    `alternates`: more phrasings of the same need (keywords, a paraphrase, a hypothetical
    answer), each searched like the query (or in the mode its `keyword:` / `semantic:` prefix
    names) and fused with it by reciprocal rank in the same store call; scores are then RRF
    scores. All query vectors come from one embedder request.

    `fusion` merges a hybrid search's two rankings (kb.store.query.FUSIONS): query.py and the
    MCP server always use the default; the others are references bench/retrieval.py compares.

    Raises ValueError for an empty query, k outside 1..MAX_K, an unknown mode or a
    negative per_note; EmbedError when the embedder fails; StoreError (CollectionMissing,
    ModelMismatch, KeywordIndexMissing, StoreUnavailable) from Qdrant.
    """
    asked = prepare(store, client, query, k, mode=mode, filters=filters, per_note=per_note,
                    alternates=alternates, fusion=fusion)  # fmt: skip
    return send(store, [asked])[0].hits


def send(store: Store, searches: Sequence[Search]) -> list[Found]:
    """Prepared searches of one collection in one store request (kb.store.points.Store.search).
    A collection dropped since kb.store.collection checked it is CollectionMissing, as before
    any check: the checks are asked again on a failure only."""
    try:
        return store.search(searches)
    except CollectionMissing:
        raise
    except StoreError:
        store.checked_model, store.has_keyword = None, False
        collection.require(store)  # CollectionMissing when it is gone
        raise


def prepare(
    store: Store,
    client: EmbedClient,
    query: str,
    k: int = 5,
    *,
    mode: Mode = "hybrid",
    filters: Filters | None = None,
    per_note: int | None = 1,
    alternates: Sequence[str] = (),
    fusion: Fusion = HYBRID_FUSION,
    pinned: bool = False,
) -> Search:
    """`search`'s store query, not sent yet: its arguments checked, the collection checked and
    the query embedded (kb.search.entry sends it in one batch with the rankings confidence
    reads). `pinned`: `client` is the collection's already (`for_collection`), not asked again.
    Raises as `search` does."""
    if not query.strip():
        raise ValueError("query is empty")
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be between 1 and {MAX_K}, got {k}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
    if per_note is not None and per_note < 0:
        raise ValueError(f"per_note must be 1 or more (0 or None: no limit), got {per_note}")
    filters = filters or Filters()
    phrasings = [(query, mode), *alternate_modes(alternates, mode)]
    dense_texts = [text for text, own in phrasings if own != "keyword"]
    vectors: list[list[float]] = []
    if dense_texts:  # keyword search needs no embedder: it works while that one is down
        client = client if pinned else for_collection(store, client)
        collection.check_model(store, client.model, client.dimensions)
        vectors = (
            [client.embed_query(query)] if len(dense_texts) == 1 and not alternates
            else client.embed_queries(dense_texts)
        )  # fmt: skip
    if any(own != "semantic" for _, own in phrasings):
        collection.require_keyword(store)
    found = iter(vectors)
    searched = [
        (
            next(found) if own != "keyword" else None,
            query_vector(text) if own != "semantic" else None,
        )
        for text, own in phrasings
    ]
    if mode == "hybrid" or any(own == "hybrid" for _, own in phrasings[1:]):
        searched = [
            (dense, keyword if dense is None or keyword is None
             else replace(keyword, semantic=semantic_weight(text, client)))
            for (dense, keyword), (text, _) in zip(searched, phrasings, strict=True)
        ]  # fmt: skip
    (dense, keyword), others = searched[0], searched[1:]
    return Search(
        k,
        dense=dense,
        keyword=keyword,
        where=filters.where(),
        per_note=per_note,
        alternates=others,
        fusion=fusion,
    )


def semantic_weight(query: str, client: EmbedClient) -> float:
    """How much `query`'s cosine counts in hybrid fusion with `client`'s model: 1, or
    UNCOVERED_WEIGHT when the model covers no language the query may be in (`trust`)."""
    return 1.0 if trust(query, client) is None else UNCOVERED_WEIGHT


def trust(query: str, client: EmbedClient) -> str | None:
    """Why hybrid search weighs `query`'s cosine down, None when it does not: the query's
    language is one `client`'s model does not cover (EMBED_LANGUAGES, or the model's row in
    kb.embedding.languages.MODEL_LANGUAGES), so its cosines carry no signal and the keyword
    ranking leads."""
    try:
        covered = client.covered
    except EmbedError:  # the embedder cannot say: nothing is weighed down
        return None
    language = uncovered(query, covered)
    if language is None:
        return None
    known = ", ".join(sorted(covered or ()))
    return (f"the query reads as {language}; the embedding model covers {known} "
            f"(EMBED_LANGUAGES): semantic weight {UNCOVERED_WEIGHT:g}")  # fmt: skip


def for_collection(store: Store, client: EmbedClient) -> EmbedClient:
    """The client for the model that built `store`'s collection: the embedder's default, or,
    while ingest rebuilds the index beside it for the default (kb.ingest.switch), the model it
    was built with when the embedder still serves it (EMBED_PREVIOUS_MODEL). Read at every
    search while the embedder serves another model: another process may switch the
    collection's name to the new index at any moment. Once the collection is checked
    (kb.store.collection.check_model), an embedder serving one model has nothing to choose
    from: no store request."""
    if store.checked_model is not None and not client.serves_others():
        return client
    built = collection.require(store).model
    if built and built != client.model and client.serves(built):
        return client.using(built)
    return client


def keyword_terms(query: str) -> int:
    """Distinct keyword terms of `query` (stopwords left out): the keyword bonus's scale."""
    vector = query_vector(query)
    return vector.words or len(vector.indices)


class TagUsage(NamedTuple):
    tag: str
    chunks: int  # chunks (passages) carrying the tag or a tag nested in it
    notes: int  # notes carrying the tag or a tag nested in it
    parent: str | None = None  # the tag it nests in: `project` for `project/alpha`


def tag_usage(store: Store) -> list[TagUsage]:
    """Every tag with the number of chunks and of notes carrying it (two facet calls), most
    chunks first, then by name (CollectionMissing if nothing was ingested yet). A note's tags hold
    the parents of its nested tags (kb.content.notes), so a parent's counts take in its
    children's."""
    collection.require(store)
    notes = dict(store.tag_counts())
    chunks = store.tag_counts(per="chunk")
    return [TagUsage(tag, n, notes.get(tag, 0), parent_tag(tag)) for tag, n in chunks]


def parent_tag(tag: str) -> str | None:
    """`project/alpha/design` -> `project/alpha`; None for a top-level tag."""
    return tag.rsplit("/", 1)[0] if "/" in tag else None
