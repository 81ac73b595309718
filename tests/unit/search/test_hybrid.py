"""Hybrid retrieval end to end: real MiniLM embeddings, real keyword vectors, embedded Qdrant.

The corpus mixes notes that only an exact lookup finds (a code identifier, an acronym, a rare
name, next to look-alikes a small dense model confuses them with) with notes that a paraphrase
finds while keyword search is misled by an incidental shared word.
"""

from collections.abc import Iterator

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import (
    UNREACHABLE_EMBEDDER,
    ingest_notes,
    make_settings,
    run_script,
    script_env,
    write,
)

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.core.settings import Settings
from kb.embedding.client import EmbedClient
from kb.search.query import search
from kb.store.points import Store

NOTES = {
    # exact lookups: each rare token sits in a note about something else, and another note
    # holds a look-alike (a sibling identifier, a similar acronym, the same family name in
    # its feminine form) that a dense model cannot tell apart from it
    "work/retro-may.md": "# Sprint retro\n\nThe release slipped a week because the CI runners "
    "kept timing out. We agreed to pair on the flaky tests, move the demo to Thursday, book the "
    "offsite for June and ask finance about the new laptops. Holidays: Sam is away the first two "
    "weeks of July. The coffee machine on the third floor is fixed at last, and the team lunch "
    "moves to Wednesdays. Anna will wrap kb.store.points.upsert_points in a retry before Friday.\n",
    "code/api.md": "# Database client\n\ndb.rows.insert_many writes a batch of records; "
    "db.rows.update_one changes a single one.\n",
    "work/offsite.md": "# Team offsite\n\nMorning on hiring plans, afternoon on the budget "
    "and the on-call rota; dinner at the harbour, where the fish was excellent and the service "
    "slow. Next year we try the lake house, if the train connections allow it; Priya books it "
    "in January. Ben owns the ECMP rollout.\n",
    "home/car.md": "# ECM\n\nThe garage replaced the ECM in the car.\n",
    "home/repairs.md": "# House repairs\n\nThe boiler needs a service before winter, the "
    "gutters are blocked again, and Wojciechowski fixed the leak under the sink.\n",
    "people/piano.md": "# Piano lessons\n\nMrs Wojciechowska teaches on Tuesdays.\n",
    # paraphrase targets, and a note that shares an incidental word with their queries
    "recipes/bread.md": "# Bread\n\nKnead the dough for ten minutes, leave it to rise for an "
    "hour, shape the loaf and bake it until the crust sounds hollow.\n",
    "health/sleep.md": "# Sleep\n\nGoing to bed at the same time and keeping screens out of "
    "the bedroom helped me drop off faster.\n",
    "travel/trains.md": "# Trains\n\nThe night train to Vienna leaves at 22:40; how long the "
    "journey takes depends on the border checks.\n",
    # non-Latin scripts
    "recipes/红烧肉.md": "# 红烧肉\n\n五花肉切块 先焯水 再加冰糖炒糖色\n"
    "放酱油和料酒 小火炖一个小时。\n",
    "recipes/김치찌개.md": "# 김치찌개\n\n잘 익은 김치와 돼지고기를 볶은 뒤\n"
    "물을 붓고 두부를 넣어 끓인다.\n",
}


@pytest.fixture(scope="module")
def corpus(
    tmp_path_factory: pytest.TempPathFactory, embedder_transport: httpx.BaseTransport
) -> Settings:
    return ingest_notes(
        tmp_path_factory.mktemp("hybrid"), IN_PROCESS_EMBED_URL, NOTES, embedder_transport
    )


@pytest.fixture
def open_corpus(corpus: Settings, embedder_transport) -> Iterator[tuple[Store, EmbedClient]]:
    with open_store(corpus) as store, embed_client(corpus, transport=embedder_transport) as client:
        yield store, client


def ranked(open_corpus, query: str, mode: str, k: int = 5) -> list[str]:
    store, client = open_corpus
    return [hit.source for hit in search(store, client, query, k, mode=mode)]


@pytest.mark.parametrize(
    ("query", "note"),
    [
        ("kb.store.points.upsert_points", "work/retro-may.md"),  # a code identifier
        ("ECMP", "work/offsite.md"),  # an acronym
        ("Wojciechowski", "home/repairs.md"),  # a rare proper noun
    ],
)
def test_exact_lookups_that_semantic_search_misses_are_found_by_hybrid_and_keyword(
    open_corpus, query, note
):
    assert ranked(open_corpus, query, "semantic")[0] != note  # the dense model alone misses
    assert ranked(open_corpus, query, "hybrid")[0] == note
    assert ranked(open_corpus, query, "keyword")[0] == note


@pytest.mark.parametrize(
    ("query", "note"),
    [
        ("trouble nodding off at night", "health/sleep.md"),  # only "night" matches: trains
        ("proving time before putting it in the oven", "recipes/bread.md"),  # "time": sleep
    ],
)
def test_paraphrases_are_still_found_by_hybrid_where_keyword_search_is_misled(
    open_corpus, query, note
):
    assert ranked(open_corpus, query, "keyword")[0] != note  # an incidental word wins there
    assert ranked(open_corpus, query, "semantic")[0] == note
    assert ranked(open_corpus, query, "hybrid")[0] == note


@pytest.mark.parametrize(
    ("query", "note"),
    [
        ("红烧肉", "recipes/红烧肉.md"),
        ("冰糖", "recipes/红烧肉.md"),
        ("두부", "recipes/김치찌개.md"),
    ],
)
def test_cjk_words_are_found_by_keyword_search(open_corpus, query, note):
    assert ranked(open_corpus, query, "keyword") == [note]  # its words: no other note has them
    assert ranked(open_corpus, query, "hybrid")[0] == note


def test_the_mode_switches_the_ranking_and_its_score(open_corpus):
    store, client = open_corpus
    query = "Wojciechowski"
    semantic = search(store, client, query, 3, mode="semantic")
    keyword = search(store, client, query, 3, mode="keyword")
    hybrid = search(store, client, query, 3, mode="hybrid")
    assert all(-1 <= h.score <= 1 for h in semantic)  # cosine similarity
    assert [h.source for h in keyword] == ["home/repairs.md"]  # only notes with the word
    assert keyword[0].score > 1  # BM25: idf x saturated term frequency
    # hybrid: the cosine plus a keyword bonus below 1
    cosine = {h.source: h.score for h in semantic}
    assert hybrid[0].source == "home/repairs.md"
    assert cosine["home/repairs.md"] < hybrid[0].score < cosine["home/repairs.md"] + 1
    assert [h.source for h in semantic] != [h.source for h in hybrid]


def test_keyword_search_needs_no_embedder_and_stopwords_alone_find_nothing(corpus):
    with open_store(corpus) as store, EmbedClient(UNREACHABLE_EMBEDDER, retries=0) as down:
        [hit] = search(store, down, "ECMP", mode="keyword")
        assert hit.source == "work/offsite.md"
        assert search(store, down, "the of and", mode="keyword") == []


def test_query_script_switches_modes(corpus, tmp_path, embedder_url):
    env = script_env(corpus, EMBED_URL=embedder_url)
    firsts = {}
    for mode in ("semantic", "keyword", "hybrid"):
        result = run_script(
            "query.py", "Wojciechowski", "--mode", mode, "-k", "1", env=env, cwd=tmp_path
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("1. ")
        firsts[mode] = result.stdout.splitlines()[0].split()[2]
    assert firsts == {
        "semantic": "people/piano.md:1-3",
        "keyword": "home/repairs.md:1-3",
        "hybrid": "home/repairs.md:1-3",
    }
    bad = run_script("query.py", "x", "--mode", "fuzzy", env=env, cwd=tmp_path)
    assert bad.returncode == 2 and "invalid choice: 'fuzzy'" in bad.stderr


def test_replacing_a_note_replaces_its_keyword_vectors_so_old_words_no_longer_match_it(
    tmp_path, embedder_transport
):
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL)
    write(settings.NOTES_DIR / "trip.md", "# Trip\n\nWe flew over the glacier in a zeppelin.\n")
    write(settings.NOTES_DIR / "other.md", "# Other\n\nA zeppelin museum in Friedrichshafen.\n")
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        run(settings, client, store)
        assert {h.source for h in search(store, client, "zeppelin", mode="keyword")} == {
            "trip.md",
            "other.md",
        }
        write(settings.NOTES_DIR / "trip.md", "# Trip\n\nWe took the ferry to the islands.\n")
        assert run(settings, client, store).replaced == ["trip.md"]
        assert [h.source for h in search(store, client, "zeppelin", mode="keyword")] == ["other.md"]
        assert [h.source for h in search(store, client, "ferry", mode="keyword")] == ["trip.md"]
