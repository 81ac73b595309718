"""The rerank stage of search (kb.search.rerank) over real ingested notes, the real embedder serving
MiniLM and the tiny cross-encoder, and search_notes through the real MCP SDK client."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest
from helpers import free_port
from mcp_fixtures import call_tool, make_settings, serve_in_process, tool_answer

from kb.app.backend import embed_client, open_store, rerank_options
from kb.core.schema import Hit
from kb.search import Searcher, SearchRequest, search
from kb.search import query as kb_search
from kb.search import rerank as kb_rerank

QUERY = "how do I ferment cabbage"


def first_stage(settings, query: str, k: int, **options) -> list[Hit]:
    with open_store(settings) as store, embed_client(settings) as client:
        return kb_search.search(store, client, query, k, **options)


def unjudged(found: kb_rerank.Reranked) -> kb_rerank.Reranked:
    """The search entry's result without what it adds after both stages (confidence, stale,
    backlinks: tests/unit/search/test_trust.py, tests/unit/content/test_obsidian.py), to compare
    with the first stage."""
    hits = [
        replace(h, confidence=None, stale=None, explain=None, links_in=None) for h in found.hits
    ]
    return replace(found, hits=hits)


def same_hits(found: list[Hit], expected: list[Hit]) -> bool:
    """The same hits in the same order, scores equal but for their last float bits: each search
    embeds the query again, on one thread or two as the embedder finds the cores."""
    return len(found) == len(expected) and all(
        replace(a, score=0.0) == replace(b, score=0.0) and abs(a.score - b.score) < 1e-6
        for a, b in zip(found, expected, strict=True)
    )


def reranked(settings, query: str, k: int, **options) -> kb_rerank.Reranked:
    with open_store(settings) as store, embed_client(settings) as client:
        return unjudged(search(Searcher(store, client, rerank=rerank_options(settings)),
                               SearchRequest(query, k, **options)))  # fmt: skip


def scores_from_the_service(url: str, query: str, hits: list[Hit], chars: int) -> list[float]:
    documents = [kb_rerank.passage(h, chars) for h in hits]
    body = httpx.post(f"{url}/v1/rerank", json={"query": query, "documents": documents}).json()
    scores = [0.0] * len(hits)
    for item in body["results"]:
        scores[item["index"]] = item["relevance_score"]
    return scores


def test_reranked_results_are_the_candidates_best_by_the_rerankers_score(
    rerank_url: str, store_copy
) -> None:
    settings = make_settings(rerank_url, store_copy(), RERANK_CANDIDATES=12, RERANK_WEIGHT=1.0)
    candidates = first_stage(settings, QUERY, 12)
    found = reranked(settings, QUERY, 5)
    assert found.reranked and found.note is None
    expected = scores_from_the_service(rerank_url, QUERY, candidates, settings.RERANK_MAX_CHARS)
    best = sorted(range(len(candidates)), key=lambda i: -expected[i])[:5]
    assert [(h.source, h.chunk_index) for h in found.hits] == [
        (candidates[i].source, candidates[i].chunk_index) for i in best
    ]
    for hit, i in zip(found.hits, best, strict=True):
        assert hit.rerank_score is not None and abs(hit.rerank_score - expected[i]) < 1e-6
        # the fused score stays beside it (the query is embedded again for each search, on one
        # thread or two as the embedder finds the cores: the last float bits may differ)
        assert hit.score == pytest.approx(candidates[i].score, abs=1e-6)
    # The random head disagrees with the first stage somewhere: reranking changed the order.
    assert [h.source for h in found.hits] != [h.source for h in candidates[:5]]


def test_the_default_blend_orders_by_weighted_reciprocal_rank_of_both_stages(
    rerank_url: str, store_copy
) -> None:
    settings = make_settings(rerank_url, store_copy(), RERANK_CANDIDATES=12)
    assert settings.RERANK_WEIGHT == 0.5
    candidates = first_stage(settings, QUERY, 12)
    expected = scores_from_the_service(rerank_url, QUERY, candidates, settings.RERANK_MAX_CHARS)
    blended = kb_rerank.order(expected, 0.5)[:5]
    found = reranked(settings, QUERY, 5)
    assert [(h.source, h.chunk_index) for h in found.hits] == [
        (candidates[i].source, candidates[i].chunk_index) for i in blended
    ]
    assert blended != kb_rerank.order(expected, 1.0)[:5]  # the blend is not the reranker alone


def test_rerank_off_gives_the_first_stage_unchanged(rerank_url: str, store_copy) -> None:
    settings = make_settings(rerank_url, store_copy())
    found = reranked(settings, QUERY, 5, rerank=False)
    assert not found.reranked and found.note is None
    assert same_hits(found.hits, first_stage(settings, QUERY, 5))
    assert all(h.rerank_score is None for h in found.hits)


def test_an_embedder_without_reranker_keeps_the_first_stage_and_says_so_when_asked(
    embedder_url: str, store_copy
) -> None:
    settings = make_settings(embedder_url, store_copy())
    expected = first_stage(settings, QUERY, 5)
    by_default = reranked(settings, QUERY, 5)
    assert same_hits(by_default.hits, expected) and by_default.note is None  # the configured state
    asked = reranked(settings, QUERY, 5, rerank=True)
    assert same_hits(asked.hits, expected) and not asked.reranked
    assert asked.note and "RERANK_MODEL" in asked.note


def test_an_embedder_that_said_it_has_no_reranker_is_not_asked_again_on_the_next_searches(
    embedder_url: str, store_copy
) -> None:
    settings = make_settings(embedder_url, store_copy())
    expected = first_stage(settings, QUERY, 5)
    with open_store(settings) as store, embed_client(settings) as client:
        searcher = Searcher(store, client, rerank=rerank_options(settings))
        found = [unjudged(search(searcher, SearchRequest(QUERY, 5))) for _ in range(3)]
        assert client.rerank_calls == 1 and client.reranker_off  # told once, for a minute
        asked = unjudged(search(searcher, SearchRequest(QUERY, 5, rerank=True)))
        assert client.rerank_calls == 2  # asked for by name: asked, and the note says why
    assert all(same_hits(f.hits, expected) and f.note is None for f in found)
    assert same_hits(asked.hits, expected) and asked.note and "RERANK_MODEL" in asked.note


def test_a_reranker_that_is_down_degrades_to_the_first_stage_with_a_note(
    embedder_url: str, store_copy
) -> None:
    folder = store_copy()
    expected = first_stage(make_settings(embedder_url, folder), "kimchi", 5, mode="keyword")
    # Keyword search needs no embedder: the first stage still runs while the embedder is down.
    down = make_settings("http://127.0.0.1:9", folder)
    found = reranked(down, "kimchi", 5, mode="keyword")
    assert same_hits(found.hits, expected) and not found.reranked
    assert found.note and "unreachable" in found.note and "first-stage order" in found.note


def test_blend_weight_zero_keeps_first_stage_order_and_one_follows_the_reranker() -> None:
    scores = [0.1, 0.9, 0.5, 0.7]
    assert kb_rerank.order(scores, 1.0) == [1, 3, 2, 0]
    assert kb_rerank.order(scores, 0.0) == [0, 1, 2, 3]
    halfway = kb_rerank.order(scores, 0.5)
    assert halfway[0] == 1  # second in both rankings' sum beats first-by-one-only
    assert sorted(halfway) == [0, 1, 2, 3]


def test_the_passage_sent_leads_with_title_and_headings_and_is_cut() -> None:
    hit = Hit(text="body " * 100, source="a.md", score=1.0, title="Kimchi", heading_path=["Salt"])
    text = kb_rerank.passage(hit, 40)
    assert text.startswith("Kimchi > Salt\nbody") and len(text) == 40
    assert kb_rerank.passage(replace(hit, title=None, heading_path=[]), 9) == "body body"


def test_search_notes_carries_rerank_scores_and_can_turn_them_off(
    rerank_url: str, store_copy
) -> None:
    settings = make_settings(rerank_url, store_copy(), MCP_PORT=free_port(), RERANK_WEIGHT=1.0)
    with serve_in_process(settings) as server:
        on = tool_answer(call_tool(server.url, "search_notes", {"query": QUERY, "k": 4}))
        off = tool_answer(
            call_tool(server.url, "search_notes", {"query": QUERY, "k": 4, "rerank": False})
        )
    assert "note" not in on and "note" not in off  # nothing to say: left out
    scores = [r["rerank_score"] for r in on["results"]]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)
    assert len(off["results"]) == 4 and not any("rerank_score" in r for r in off["results"])
    first = first_stage(settings, QUERY, 4)
    assert [r["source"] for r in off["results"]] == [h.source for h in first]


def test_search_notes_reports_a_missing_reranker_in_a_note_not_an_error(
    embedder_url: str, store_copy
) -> None:
    settings = make_settings(embedder_url, store_copy(), MCP_PORT=free_port())
    with serve_in_process(settings) as server:
        result = call_tool(server.url, "search_notes", {"query": QUERY, "rerank": True})
    assert not result.is_error
    content = tool_answer(result)
    assert content["results"] and "RERANK_MODEL" in content["note"]
