"""How many round trips one search makes: the engine under the Store is wrapped to count the
requests it is asked (the real engine answers each), the embedder client counts its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import in_process_qdrant, make_settings, write

from bench.common import CountedEngine
from kb.app.backend import embed_client, open_store, searcher
from kb.app.ingest import run
from kb.core.errors import CollectionMissing
from kb.core.settings import Settings
from kb.search import SearchRequest, search
from kb.store import points
from kb.store.points import Search, Store

NOTES = {
    "garden/tomatoes.md": "# Tomatoes\n\nWater the tomato plants every morning and tie them "
    "to stakes as they grow.\n",
    "garden/herbs.md": "# Herbs\n\nBasil next to the [[tomatoes]] keeps pests away.\n",
    "recipes/salsa.md": "# Salsa\n\nChop [[tomatoes]], onion and chilli; season with lime.\n",
    "recipes/bread.md": "# Bread\n\nKnead the dough, let it rise, bake it in a hot oven.\n",
}


@pytest.fixture(scope="module", params=["embedded", "server"])
def indexed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, embedder_transport
) -> Iterator[Settings]:
    folder = tmp_path_factory.mktemp(request.param)
    overrides: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "server":
            overrides = {"QDRANT_PATH": "", "QDRANT_URL": in_process_qdrant(patch, folder / "q")}
        settings = make_settings(folder, IN_PROCESS_EMBED_URL, **overrides)
        for name, text in NOTES.items():
            write(settings.NOTES_DIR / name, text)
        with (
            open_store(settings) as store,
            embed_client(settings, transport=embedder_transport) as client,
        ):
            assert sorted(run(settings, client, store).ingested) == sorted(NOTES)
        yield settings


@pytest.fixture
def counted(indexed: Settings) -> Iterator[tuple[Store, CountedEngine]]:
    with open_store(indexed) as opened:
        engine = CountedEngine(opened._engine)
        yield Store(engine, opened.collection), engine


def test_a_default_search_makes_three_round_trips_the_embedder_and_the_store_twice(
    indexed: Settings,
    counted: tuple[Store, CountedEngine],
    monkeypatch: pytest.MonkeyPatch,
    embedder_transport: httpx.BaseTransport,
) -> None:
    store, engine = counted
    monkeypatch.setattr(points, "monotonic", lambda: 0.0)  # within MISSING_TTL on a server
    with (
        embed_client(indexed, transport=embedder_transport) as client,
        embed_client(indexed, code=True, transport=embedder_transport) as code_client,
    ):
        look = searcher(indexed, store, client, code_client)
        search(look, SearchRequest("how do I water tomato plants"))  # checks the collections
        engine.calls.clear()
        embedded, reranked = client.calls, client.rerank_calls
        found = search(look, SearchRequest("what keeps pests away from tomatoes"))
    # the code collection (none yet) is not looked for again; the notes' first stage and both
    # rankings confidence reads go in one batch; the backlinks are one read
    assert engine.calls == ["query_batch", "scroll"]
    asked = (client.calls - embedded, client.rerank_calls - reranked)
    assert asked == (1, 0) and len(engine.calls) + sum(asked) <= 3
    assert all(h.confidence is not None and h.stale is False for h in found.hits)
    links_in = {h.source: h.links_in for h in found.hits}
    assert links_in["garden/tomatoes.md"] == 2 and links_in["garden/herbs.md"] == 0


def test_a_batched_grouped_search_finds_what_the_engines_grouped_query_finds(
    indexed: Settings, counted: tuple[Store, CountedEngine], embedder_transport: httpx.BaseTransport
) -> None:
    store, _ = counted
    with embed_client(indexed, transport=embedder_transport) as client:
        dense = client.embed_query("tomato plants in the garden")
    for per_note in (1, 2):
        alone = store.query(3, dense=dense, per_note=per_note)
        [batched] = store.search([Search(3, dense=dense, per_note=per_note)])
        assert [(h.source, h.chunk_index, round(h.score, 6)) for h in batched.hits] == [
            (h.source, h.chunk_index, round(h.score, 6)) for h in alone
        ]
        assert set(batched.files) == {h.source for h in batched.hits}


def test_a_search_of_a_collection_dropped_after_its_check_says_it_is_missing(
    tmp_path: Path, embedder_transport
) -> None:
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL)
    write(settings.NOTES_DIR / "a.md", "# A\n\nSome words about tomatoes.\n")
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        run(settings, client, store)
        look = searcher(settings, store, client, client)
        assert search(look, SearchRequest("tomatoes")).hits
        assert store.drop_collection()
        with pytest.raises(CollectionMissing, match="ingest notes first"):
            search(look, SearchRequest("tomatoes again"))
