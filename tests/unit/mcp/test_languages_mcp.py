"""Notes in other languages found by another form of their words through search_notes: keyword
analysis per language (kb.embedding.languages), over real ingest, the real MiniLM embedder,
embedded Qdrant and the MCP server in-process. One note per language family, each beside the
others, so a query must find its note and not merely some note."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import build_settings, free_port
from mcp_fixtures import call_tool, results, serve_in_process

from kb.app import ingest
from kb.app.backend import embed_client, open_store

NOTES = {
    # Germanic: a compound with an umlaut in its plural
    "de/imkerei.md": "# Imkerei\n\nIm Herbst füttern wir die Bienenvölker mit Zuckersirup, "
    "damit sie den Winter überstehen. Die Völker sitzen dann dicht in der Wintertraube.\n",
    # Romance: an infinitive with a clitic pronoun, and accents
    "es/gato.md": "# El gato\n\nHay que alimentarla dos veces al día; la gata come pescado y "
    "duerme junto a la ventana de la habitación.\n",
    # Cyrillic: an irregular plural
    "ru/pasika.md": "# Пасека\n\nЗимой ульи стоят в омшанике, а весной их выносят на солнце. "
    "Пчёлы облетываются в первый тёплый день.\n",
    # Japanese: a word inside a sentence without spaces
    "ja/youhou.md": "# 養蜂の記録\n\n冬の前に巣箱を点検して、蜂蜜の量を確かめました。"
    "女王蜂は元気でした。\n",
    # Chinese
    "zh/yangfeng.md": "# 养蜂笔记\n\n冬天之前我们检查了蜂箱里的蜂蜜储量，蜂王状态很好。"
    "结婚的和尚未结婚的邻居都来帮忙。\n",
    "zh/siyuan.md": "# 寺院\n\n山上的寺院里住着一位老和尚，每天早上扫地。\n",
    # Korean: nouns glued to their particles
    "ko/yangbong.md": "# 양봉 기록\n\n겨울이 오기 전에 벌통에서 꿀을 꺼냈다. 여왕벌은 건강했다.\n",
    "en/garden.md": "# Garden\n\nThe bees visit the lavender every morning; the hives stand "
    "behind the shed.\n",
    # a note whose frontmatter names its language
    "misc/tagged.md": "---\nlang: pt-BR\n---\n# Receita\n\nMisture as canções antigas.\n",
}


@pytest.fixture(scope="module", name="server_url")
def server_url_fixture(
    tmp_path_factory: pytest.TempPathFactory, embedder_url: str
) -> Iterator[str]:
    root = tmp_path_factory.mktemp("languages")
    settings = build_settings(embedder_url, root, MCP_PORT=free_port())
    for relative, text in NOTES.items():
        path = Path(settings.NOTES_DIR) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    with embed_client(settings) as client, open_store(settings) as store:
        summary = ingest.run(settings, client, store)
    assert not summary.failed, summary.failed
    with serve_in_process(settings) as server:
        yield server.url


def found(url: str, query: str, **arguments: object) -> list[dict[str, object]]:
    answer = call_tool(url, "search_notes", {"query": query, "k": 3, **arguments})
    return results(answer)


@pytest.mark.parametrize(
    ("query", "note"),
    [
        ("Bienenvolk", "de/imkerei.md"),  # Germanic: singular of a compound, no umlaut
        ("Wintertrauben überstehe", "de/imkerei.md"),
        ("Sirup", "de/imkerei.md"),  # ... a part of a compound (Zucker|sirup)
        ("alimentar habitacion", "es/gato.md"),  # Romance: infinitive, accent left out
        ("улей", "ru/pasika.md"),  # Cyrillic: singular of ульи
        ("пчелы", "ru/pasika.md"),  # е for ё
        ("巣箱", "ja/youhou.md"),  # Japanese: a word of a sentence written without spaces
        ("確かめる", "ja/youhou.md"),  # ... a verb by its dictionary form (確かめました)
        ("巣箱点検", "ja/youhou.md"),  # ... words written in kanji alone
        ("蜂箱", "zh/yangfeng.md"),  # Chinese
        ("벌통", "ko/yangbong.md"),  # Korean: the noun without its particle (벌통에서)
        ("꿀", "ko/yangbong.md"),  # ... a one-syllable noun (꿀을)
        ("꺼내다", "ko/yangbong.md"),  # ... a verb by another ending (꺼냈다)
    ],
)
def test_a_note_is_found_by_another_form_of_its_words(
    server_url: str, query: str, note: str
) -> None:
    hits = found(server_url, query, mode="keyword")
    assert hits and hits[0]["source"] == note, [h["source"] for h in hits]


def test_a_chinese_word_is_not_found_across_the_boundary_of_two_others(server_url: str) -> None:
    # 和尚 (monk) is in one note; the other has 和|尚未 (and | not yet), its character pair only
    hits = found(server_url, "和尚", mode="keyword")
    assert [h["source"] for h in hits] == ["zh/siyuan.md"]


def test_each_result_says_its_language_and_the_language_filter_keeps_one(server_url: str) -> None:
    hits = found(server_url, "Bienenvölker", mode="keyword")
    assert hits[0]["language"] == "de"
    japanese = found(server_url, "蜂蜜", mode="keyword", language="ja")
    assert [h["source"] for h in japanese] == ["ja/youhou.md"]
    assert all(h["language"] == "ja" for h in japanese)


def test_a_frontmatter_lang_wins_over_detection(server_url: str) -> None:
    hits = found(server_url, "antiga", mode="keyword", language="pt")  # pt-BR: its language
    assert [h["source"] for h in hits] == ["misc/tagged.md"]


def test_an_unknown_language_filter_finds_nothing_rather_than_failing(server_url: str) -> None:
    assert found(server_url, "bees", mode="keyword", language="xx") == []
