"""Hybrid search with an embedding model that does not know the query's language (issue 49):
the English-only MiniLM test model's cosines of a Russian or Japanese query are noise, so the
keyword ranking leads (kb.search.query.trust, kb.store.query.UNCOVERED_WEIGHT); an English
query is searched as before, and EMBED_LANGUAGES tells search what the model covers."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import ingest_notes

from kb.app.backend import embed_client, open_store
from kb.app.query_print import explained
from kb.core.settings import Settings
from kb.embedding.client import EmbedClient
from kb.search import Searcher, SearchRequest
from kb.search import search as search_entry
from kb.search.query import search
from kb.store.points import Store
from kb.store.query import UNCOVERED_WEIGHT

NOTES = {
    "ru/пасека.md": "# Пасека\n\nЗимой ульи стоят в омшанике, а весной их выносят на пасеку. "
    "Осенью пчёл подкармливают сахарным сиропом, чтобы семьи пережили холода.\n",
    "ru/сад.md": "# Сад\n\nВесной мы обрезаем яблони и белим стволы. Летом поливаем грядки "
    "каждый вечер, осенью собираем урожай и варим варенье.\n",
    "ru/машина.md": "# Машина\n\nМашину отвезли на сервис: заменили тормозные колодки и масло. "
    "Зимой ставим шипованную резину.\n",
    "ja/養蜂.md": "# 養蜂\n\n冬の前に巣箱を点検して、蜂蜜の量を確かめました。"
    "春になったら巣箱を日当たりの良い場所に移します。\n",
    "ja/料理.md": "# 料理\n\n味噌汁は出汁を取ってから味噌を溶かします。"
    "豆腐とわかめを入れて、沸騰させないようにします。\n",
    "ja/旅行.md": "# 旅行\n\n夜行バスで京都へ行きました。朝早く着いたので、"
    "お寺を見てから朝ご飯を食べました。\n",
    "en/bees.md": "# Beekeeping\n\nIn winter the hives stand in the shed; in spring we carry "
    "them out to the apiary and check how much honey is left.\n",
    "en/sleep.md": "# Sleep\n\nGoing to bed at the same time and keeping screens out of the "
    "bedroom helped me drop off faster.\n",
    "en/bread.md": "# Bread\n\nKnead the dough for ten minutes, leave it to rise for an hour, "
    "shape the loaf and bake it.\n",
}
QUERIES = {
    "ru": ("сироп для пчёл осенью", "ru/пасека.md"),
    "ja": ("蜂蜜はいつ確かめる", "ja/養蜂.md"),
}


@pytest.fixture(scope="module")
def corpus(
    tmp_path_factory: pytest.TempPathFactory, embedder_transport: httpx.BaseTransport
) -> Settings:
    return ingest_notes(
        tmp_path_factory.mktemp("trust"), IN_PROCESS_EMBED_URL, NOTES, embedder_transport
    )


@pytest.fixture(params=["", "all"], ids=["model's languages", "EMBED_LANGUAGES=all"])
def opened(
    request: pytest.FixtureRequest, corpus: Settings, embedder_transport: httpx.BaseTransport
) -> Iterator[tuple[str, Store, EmbedClient]]:
    settings = corpus.model_copy(update={"EMBED_LANGUAGES": request.param})
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        yield request.param, store, client


@pytest.mark.parametrize("language", sorted(QUERIES))
def test_hybrid_follows_the_keyword_ranking_where_the_model_does_not_know_the_language(
    opened, language: str
) -> None:
    languages, store, client = opened
    query, note = QUERIES[language]
    keyword = [h.source for h in search(store, client, query, 5, mode="keyword")]
    hybrid = search(store, client, query, 5, mode="hybrid")
    assert keyword[0] == note
    assert [h.source for h in hybrid][: len(keyword)] == keyword
    unmatched = [h for h in hybrid if h.source not in keyword]
    assert unmatched  # the cosine still orders what the keyword side did not find
    if languages == "":  # MiniLM covers English only: its cosine counts UNCOVERED_WEIGHT
        assert all(h.score <= UNCOVERED_WEIGHT for h in unmatched)
    else:  # the user says the model covers every language: the cosine counts in full
        assert all(h.score > UNCOVERED_WEIGHT for h in unmatched)


def test_an_english_query_is_searched_as_before(opened) -> None:
    _, store, client = opened
    found = search(store, client, "when do the hives go out", 3, mode="hybrid")
    cosines = {h.source: h.score for h in search(store, client, "when do the hives go out", 9,
                                                  mode="semantic")}  # fmt: skip
    assert found[0].source == "en/bees.md"
    # not found by keyword: its hybrid score is its full cosine
    assert found[-1].score == pytest.approx(cosines[found[-1].source], abs=1e-4)


def test_explain_says_when_and_why_the_semantic_side_was_weighed_down(opened) -> None:
    languages, store, client = opened
    searcher = Searcher(store, client)
    russian = search_entry(searcher, SearchRequest(QUERIES["ru"][0], k=2, explain=True))
    english = search_entry(searcher, SearchRequest("when do the hives go out", k=2, explain=True))
    why = russian.hits[0].explain
    assert why is not None
    if languages == "":
        assert why.semantic_down is not None
        assert "reads as ru" in why.semantic_down and "covers en" in why.semantic_down
        assert "semantic weighed down: the query reads as ru" in explained(russian.hits[0])
    else:
        assert why.semantic_down is None
    assert all(h.explain is not None and h.explain.semantic_down is None for h in english.hits)
