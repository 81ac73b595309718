"""search_notes' `alternates`: more phrasings fused with the query by rank in one store call,
over real ingested notes, the real MiniLM embedder and embedded Qdrant."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import free_port
from mcp_fixtures import call_tool, error_text, make_settings, results, serve_in_process

from kb.app.backend import embed_client, open_store
from kb.embedding.client import EmbedClient
from kb.search import query as kb_search
from kb.store.edge import EdgeEngine
from kb.store.points import Store

OCTOPUS = "misc/fact-11.txt"


@pytest.fixture
def opened(embedder_transport, store_copy) -> Iterator[tuple[Store, EmbedClient]]:
    settings = make_settings(IN_PROCESS_EMBED_URL, store_copy())
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        yield store, client


def test_phrasings_that_agree_bring_up_what_the_query_alone_misses(opened) -> None:
    store, client = opened
    query = "zebra crossing timetable"  # shares nothing with the note looked for
    alone = kb_search.search(store, client, query, 3)
    assert OCTOPUS not in [h.source for h in alone]
    together = kb_search.search(
        store,
        client,
        query,
        3,
        alternates=["keyword: octopuses hearts", "semantic: an animal with three hearts"],
    )
    assert together[0].source == OCTOPUS
    assert len({h.source for h in together}) == 3  # still one passage per note


def test_all_phrasings_go_to_the_store_in_one_call_and_the_embedder_in_one_request(
    opened, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, client = opened
    sent: list = []  # the requests embedded storage's engine gets
    real = EdgeEngine.query

    def counted(engine, name, request):
        sent.append(request)
        return real(engine, name, request)

    monkeypatch.setattr(EdgeEngine, "query", counted)
    before = client.calls
    hits = kb_search.search(
        store, client, "fermented cabbage", 4, per_note=None,
        alternates=["kimchi recipe", "keyword: gochugaru", "semantic: salted napa cabbage"],
    )  # fmt: skip
    assert client.calls - before == 1  # three dense phrasings, one /v1/embeddings request
    assert len(sent) == 1 and len(sent[0].prefetch) == 4
    assert hits[0].source == "cooking/kimchi.md"


def test_keyword_only_phrasings_need_no_embedder(store_copy) -> None:
    folder = store_copy()
    down = make_settings("http://127.0.0.1:9", folder)
    with open_store(down) as store, embed_client(down) as client:
        hits = kb_search.search(
            store, client, "kimchi", 3, mode="keyword", alternates=["gochugaru"]
        )
    assert hits[0].source == "cooking/kimchi.md"


def test_without_alternates_results_are_unchanged(opened) -> None:
    store, client = opened
    plain = kb_search.search(store, client, "bread oven", 5)
    assert kb_search.search(store, client, "bread oven", 5, alternates=[]) == plain
    # Phrasings with nothing to search (stopwords, keyword-only) fall back to the query alone.
    assert kb_search.search(store, client, "bread oven", 5, alternates=["keyword: the"]) == plain


def test_alternate_prefixes_pick_a_mode_and_empty_ones_are_named() -> None:
    parsed = kb_search.alternate_modes(
        ["keyword: E1234", "Semantic: a paraphrase", "plain words"], "hybrid"
    )
    assert parsed == [("E1234", "keyword"), ("a paraphrase", "semantic"), ("plain words", "hybrid")]
    with pytest.raises(ValueError, match=r"alternates\[1\] is empty"):
        kb_search.alternate_modes(["fine", "keyword:  "], "hybrid")
    with pytest.raises(ValueError, match="at most 5"):
        kb_search.alternate_modes(["a"] * 6, "hybrid")


def test_search_notes_takes_alternates_and_names_a_bad_one(embedder_transport, store_copy) -> None:
    settings = make_settings(IN_PROCESS_EMBED_URL, store_copy(), MCP_PORT=free_port())
    with serve_in_process(settings, transport=embedder_transport) as server:
        found = results(
            call_tool(
                server.url,
                "search_notes",
                {
                    "query": "zebra crossing timetable",
                    "k": 2,
                    "alternates": ["keyword: octopuses hearts", "an animal with three hearts"],
                },
            )
        )
        bad = call_tool(server.url, "search_notes", {"query": "x", "alternates": ["semantic:"]})
    assert found[0]["source"] == OCTOPUS
    assert "alternates[0] is empty" in error_text(bad)
