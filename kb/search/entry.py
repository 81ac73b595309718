"""The one search entry: `search(searcher, request)`, used by the MCP tools (search_notes,
answer_question), query.py (here and, through the MCP server, kb.app.remote) and the
dashboard's search page.

A `SearchRequest` says what to find (query, k, mode, filters, per_note, alternates, domain,
rerank, explain, max_chars) and refuses a bad value when it is made, naming the field as the
tools name it; a `Searcher` is what a search reads: the notes' store and embedder client, the
code collection's, the rerank stage's settings as plain values and the folders notes are read
from (kb.app.backend builds it from the settings: kb.search reads no settings). The first stage
is kb.search.query.search over one collection (kb.search.domains.search_all over both, fused by
rank), the second kb.search.rerank.rerank. Then every result gets its `confidence`
(kb.search.confidence, from a semantic and a keyword ranking of the query, kb.search.explain),
its `stale` flag (kb.search.fresh) and, asked for, its `explain`; with `max_chars` the best
passages are packed into that budget (kb.search.budget) instead of returning k of them, and each
note's hit gets its backlink count (kb.search.related).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, get_type_hints

from kb.core.errors import CollectionMissing, EmbedError, StoreError
from kb.core.kinds import PROSE
from kb.core.schema import NOTE, FileStat, Hit
from kb.search import budget, fresh, lead, paths
from kb.search import confidence as calibrated
from kb.search import explain as explaining
from kb.search import query as kb_query
from kb.search.domains import DOMAINS, Domain, merged
from kb.search.filters import Filters
from kb.search.parameters import Parameter, param, table
from kb.search.rerank import Reranked, rerank, unloaded
from kb.store import collection

if TYPE_CHECKING:
    from kb.embedding.client import EmbedClient
    from kb.store.points import Store

# The most passages one MCP tool call returns (kb.search allows MAX_K): results go into the
# assistant's context, where twenty passages are already plenty.
TOOL_MAX_K = 20


@dataclass(frozen=True)
class RerankOptions:
    """The rerank stage's settings (RERANK_CANDIDATES, RERANK_WEIGHT, RERANK_MAX_CHARS as
    `passage_chars`, RERANK_TIMEOUT in kb.core.settings, which says what each does)."""

    candidates: int = 30
    weight: float = 0.5
    passage_chars: int = 1200
    timeout: float = 30.0


@dataclass(frozen=True)
class Searcher:
    """What a search reads. `code`: the code collection and its client (None: the notes only,
    whatever the request's domain)."""

    store: Store
    client: EmbedClient
    code: tuple[Store, EmbedClient] | None = None
    rerank: RerankOptions = field(default_factory=RerankOptions)
    # where notes are read from, by origin: "inbox" -> NOTES_DIR/ingested, a NOTE_FOLDERS name ->
    # its folder (kb.search.fresh); empty: staleness unknown
    roots: Mapping[str, Path] = field(default_factory=dict)

    def collections(self) -> dict[str, tuple[Store, EmbedClient]]:
        """The store and client of each domain searched."""
        found = {"prose": (self.store, self.client)}
        return found | ({"code": self.code} if self.code is not None else {})


@dataclass(frozen=True)
class SearchRequest:
    """One search. `per_note` None or 0: no limit of passages per note; `rerank` None: when
    the embedder serves a reranker, False: first stage only, True: asked for (the result's note
    says so when it cannot run). ValueError naming the field for a value out of range."""

    query: str
    # fmt: off
    k: int = param(5, "count", option="-k", help="Passages to return, 1-{most}.")
    mode: kb_query.Mode = param("hybrid", "choice",
        help="hybrid: meaning and exact words; semantic: meaning only; keyword: exact words "
        "only (BM25).")
    filters: Filters = field(default_factory=Filters)
    per_note: int | None = param(1, "limit",
        help="Passages per note at most, 0-{most}: 1 gives distinct notes, 0 ranks passages "
        "alone.")
    alternates: Sequence[str] = param((), "texts", option="--alternate",
        help=f"Up to {kb_query.MAX_ALTERNATES} more phrasings, searched with `query` and merged "
        "by rank; one starting 'keyword: ' or 'semantic: ' is searched that way only.")
    domain: Domain = param("all", "choice",
        help="all: notes and code, merged by rank; prose: no code; code: source code and "
        "notebooks only.")
    rerank: bool | None = param(None, "toggle", option="--no-rerank",
        help="Reorder the best candidates with the reranker (default: when the embedder serves "
        "one); false is faster.")
    # each result says how it was found (kb.core.schema.Explanation)
    explain: bool = param(False, "switch", help="Say how each result was found.")
    # pack the best passages into this many characters, not k (kb.search.budget)
    max_chars: int | None = param(None, "chars",
        help=f"Instead of k: the best passages in this many characters ({budget.MIN_CHARS}-"
        f"{budget.MAX_CHARS}), adjacent chunks merged.")
    # fmt: on

    def __post_init__(self) -> None:
        if not self.query.strip():
            raise ValueError("query is empty")
        if not 1 <= self.k <= kb_query.MAX_K:
            raise ValueError(f"k must be between 1 and {kb_query.MAX_K}, got {self.k}")
        if self.mode not in kb_query.MODES:
            raise ValueError(f"mode must be one of {', '.join(kb_query.MODES)}, got {self.mode!r}")
        if self.per_note is not None and self.per_note < 0:
            raise ValueError(
                f"per_note must be 1 or more (0 or None: no limit), got {self.per_note}"
            )
        if self.domain not in DOMAINS:
            raise ValueError(f"domain must be one of {', '.join(DOMAINS)}, got {self.domain!r}")
        object.__setattr__(self, "alternates", tuple(self.alternates))
        kb_query.alternate_modes(self.alternates, self.mode)  # names alternates[i] at fault
        budget.check(self.max_chars)


# The search parameters' table (kb.search.parameters): SearchRequest's fields declared with param
PARAMETERS: tuple[Parameter, ...] = table(SearchRequest, get_type_hints(SearchRequest))


def search(searcher: Searcher, request: SearchRequest) -> Reranked:
    """The first stage, then the rerank stage over its best `searcher.rerank.candidates` (at
    least k): the reranker puts prose and code on one scale. Without a reranker to read more
    than k, the first stage fetches only k. Then confidence, staleness, explanations and the
    budget (see the module docstring). EmbedError, StoreError as the stages raise them.

    Round trips: the query's embedding; one store request per collection for the first stage
    and the rankings confidence reads (`first_pass`); the reranker's, when it runs; one store
    request for the backlinks. Staleness reads the hits' own payloads. A collection seen missing
    (the code collection, before any code is ingested) is not asked about at every search
    (kb.store.points.Store.missing_lately)."""
    if request.filters.path:  # as the index names it (a folder's notes start with its name)
        stores = [store for store, _ in searcher.collections().values()]
        where = paths.resolve(stores, request.filters.path)
        if where.problem:
            return Reranked([], note=where.problem)
        request = replace(request, filters=replace(request.filters, path=where.path))
    packing = request.max_chars is not None
    k = max(request.k, budget.CANDIDATES) if packing else request.k
    per_note = None if packing else request.per_note  # packing counts merged passages
    passes: dict[str, Pass] = {}  # by collection

    def one(store: Store, client: EmbedClient, depth: int) -> list[Hit]:
        passes[store.collection] = first_pass(store, client, request, depth, per_note)
        return passes[store.collection].hits

    def first(depth: int) -> list[Hit]:
        if searcher.code is None:
            return one(searcher.store, searcher.client, depth)
        return merged((searcher.store, searcher.client), searcher.code,
                      lambda store, client: one(store, client, depth), depth,
                      request.domain)  # fmt: skip

    client, options = searcher.client, searcher.rerank
    if request.rerank is False or (request.rerank is None and client.reranker_off):
        failure = client.reranker_failure if request.rerank is None else None
        found = Reranked(first(k), note=unloaded(failure) if failure else None)
        ordered = found.hits
    else:
        depth = min(kb_query.MAX_K, max(k, options.candidates))
        ordered = first(depth)
        found = rerank(client, request.query, ordered, k, weight=options.weight,
                       passage_chars=options.passage_chars, timeout=options.timeout,
                       requested=request.rerank is True)  # fmt: skip
    by_domain = {d: passes[s.collection] for d, (s, _) in searcher.collections().items()
                 if s.collection in passes}  # fmt: skip
    hits = judged(searcher, request, found, ordered, per_note, by_domain)
    if per_note == 1:  # one passage a note: a definition question's named note shows its start
        hits = lead.with_leads(searcher.store, request.query, hits)
    hits = with_backlinks(searcher.store, hits)
    files = {(d, source): stat for d, p in by_domain.items() for source, stat in p.files.items()}
    hits = fresh.mark(hits, files, searcher.roots)
    if packing:
        assert request.max_chars is not None
        hits = budget.pack(hits, request.max_chars, request.per_note)
    return replace(found, hits=hits, no_good_match=_no_match(searcher, hits))


@dataclass(frozen=True)
class Pass:
    """A collection's first stage, and the rankings its results' confidence reads."""

    hits: list[Hit]
    rankings: explaining.Rankings
    files: dict[str, FileStat]  # what ingest recorded of the hits' notes' files
    unembedded: frozenset[str] = frozenset()  # hits' notes found by their words only so far


def first_pass(
    store: Store, client: EmbedClient, request: SearchRequest, depth: int, per_note: int | None
) -> Pass:
    """The first stage (kb.search.query) and the semantic and keyword rankings of the query
    (kb.search.explain) in one collection, from one store request, all with the collection's
    own client (read once: kb.search.query.for_collection). When ingest switched the
    collection's name to an index of another model meanwhile (kb.ingest.switch), the request
    fails on its vectors: it is prepared again, once, for the index now named."""
    own = _own(store, client)
    try:
        return _pass(store, own or client, request, depth, per_note)
    except CollectionMissing:
        raise
    except StoreError:
        if own is None or collection.require(store).model in (None, own.model):
            raise
        return _pass(store, _own(store, client) or client, request, depth, per_note)


def _own(store: Store, client: EmbedClient) -> EmbedClient | None:
    """The collection's client; None while the embedder cannot say (a keyword search works
    without it; one that needs it fails when it asks)."""
    try:
        return kb_query.for_collection(store, client)
    except EmbedError:
        return None


def _pass(
    store: Store, client: EmbedClient, request: SearchRequest, depth: int, per_note: int | None
) -> Pass:
    asked = kb_query.prepare(
        store, client, request.query, depth, mode=request.mode, filters=request.filters,
        per_note=per_note, alternates=request.alternates, pinned=True,
    )  # fmt: skip
    semantic, keyword = explaining.ranking_searches(store, client, request.query,
                                                    request.filters, per_note)  # fmt: skip
    rankings = [s for s in (semantic, keyword) if s is not None]
    found, *ranked = kb_query.send(store, [asked, *rankings])
    answers = iter(ranked)
    semantic_hits, keyword_hits = (None if s is None else next(answers).hits
                                   for s in (semantic, keyword))  # fmt: skip
    rankings_found = explaining.rankings(request.query, semantic_hits, keyword_hits)
    return Pass(found.hits, rankings_found, found.files, found.unembedded)


def with_backlinks(store: Store, hits: list[Hit]) -> list[Hit]:
    """Each note's hit with how many notes link to it (`links_in`, one store request)."""
    notes = [h.source for h in hits if h.source and h.kind == NOTE and h.domain == PROSE]
    counts = store.backlink_counts(notes)
    return [replace(h, links_in=counts[h.source]) if h.source in counts else h for h in hits]


def judged(
    searcher: Searcher,
    request: SearchRequest,
    found: Reranked,
    ordered: Sequence[Hit],
    per_note: int | None,
    passes: Mapping[str, Pass],
) -> list[Hit]:
    """The hits with their confidence and, asked for, their explanation, from the rankings of
    the collection (by domain: `passes`) each came from."""
    collections = searcher.collections()
    ranks = {domain: passes[domain].rankings for domain in {h.domain for h in found.hits}
             if domain in passes}  # fmt: skip
    fitted = calibrated.calibration(_model(searcher.client))
    phrasings = [("query", request.query), *(("alternate: " + a, a) for a in request.alternates)]
    found_by: dict[str, dict[str, set[explaining.Key]]] = {}
    if request.explain and request.alternates:
        for domain in ranks:
            store, client = collections[domain]
            found_by[domain] = explaining.found_by(store, client, phrasings, request.filters,
                                                   per_note, max(request.k, 10))  # fmt: skip
    rerank_scores = {
        explaining.key(h): h.rerank_score for h in found.candidates if h.rerank_score is not None
    }
    down: dict[str, str | None] = {}  # by domain: why its cosine counted less, if it did
    if request.explain and request.mode == "hybrid":
        down = {domain: kb_query.trust(request.query, collections[domain][1])
                for domain in ranks if domain in collections}  # fmt: skip
    out: list[Hit] = []
    for hit in found.hits:
        domain_ranks = ranks.get(hit.domain)
        signals = calibrated.signals(hit, domain_ranks) if domain_ranks is not None else None
        sure = calibrated.confidence(signals, fitted) if signals is not None else None
        why = None
        if request.explain:
            store = collections.get(hit.domain, (searcher.store, searcher.client))[0]
            why = explaining.explanation(
                hit, domain_ranks, ordered, reranked=found.reranked,
                weight=searcher.rerank.weight, rerank_scores=rerank_scores,
                found=found_by.get(hit.domain, {}), filters=request.filters,
                collection=store.collection,
                unembedded=hit.domain in passes and hit.source in passes[hit.domain].unembedded,
                semantic_down=down.get(hit.domain),
            )  # fmt: skip
        out.append(replace(hit, confidence=sure, explain=why))
    return out


def _model(client: EmbedClient) -> str:
    try:
        return client.model
    except EmbedError:
        return ""


def _no_match(searcher: Searcher, hits: Sequence[Hit]) -> bool | None:
    fitted = calibrated.calibration(_model(searcher.client))
    return calibrated.no_good_match([h.confidence for h in hits], fitted)
