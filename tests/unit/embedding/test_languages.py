"""Keyword analysis per language (kb.embedding.languages, kb.embedding.keywords): which language
a text is in, and the terms another form of a word meets its note by."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.content.notes import parse_note
from kb.embedding.keywords import document_vector, query_vector, query_words, tokenize
from kb.embedding.languages import detect, query_languages


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Im Herbst füttern wir die Bienenvölker mit Zuckersirup.", "de"),
        ("Hay que alimentarla dos veces al día junto a la ventana.", "es"),
        ("Зимой ульи стоят в омшанике, а весной их выносят.", "ru"),
        ("冬の前に巣箱を点検して、蜂蜜の量を確かめました。", "ja"),
        ("冬天之前我们检查了蜂箱里的蜂蜜储量。", "zh"),
        ("겨울이 오기 전에 벌통에서 꿀을 꺼냈다.", "ko"),
        ("首先导入 BackgroundTasks 并在 路径操作函数 中使用类型声明 BackgroundTasks", "zh"),
        ("The hives stand behind the shed all winter.", "en"),
        ("enqueue_many", "en"),  # too short to tell: English, as the index was before
    ],
)
def test_a_text_is_detected_in_its_language(text: str, language: str) -> None:
    assert detect(text) == language


def test_a_chunk_is_detected_by_its_prose_not_by_the_title_it_starts_with() -> None:
    # what ingest embeds for a chunk: the note's title and heading path, then the chunk
    chunk = (
        "CORS (Cross-Origin Resource Sharing) { #cors-cross-origin-resource-sharing }\n\n"
        "## Ursprung { #origin }\n\n"
        "Ein Ursprung ist die Kombination aus Protokoll, Domain und Port. Alle diese Ursprünge "
        "sind verschieden, auch wenn sie alle auf demselben Rechner laufen und dieselbe "
        "Anwendung ausliefern."
    )
    assert detect(chunk) == "de"


def shared(note: str, query: str) -> set[str]:
    """The terms a query shares with a note, each analysed as search and ingest do."""
    return set(tokenize(note, (detect(note),))) & set(tokenize(query, query_languages(query)))


@pytest.mark.parametrize(
    ("note", "query"),
    [
        ("Im Herbst füttern wir die Bienenvölker mit Zuckersirup.", "Bienenvolk"),
        ("Hay que alimentarla dos veces al día en la habitación.", "alimentar habitacion"),
        ("Зимой ульи стоят в омшанике, пчёлы спят.", "улей пчелы"),
        ("겨울이 오기 전에 벌통에서 꿀을 꺼냈다.", "꿀"),
        ("冬の前に巣箱を点検して、蜂蜜の量を確かめました。", "確かめる"),
        ("ＦａｓｔＡＰＩ　で　ＡＰＩ　を作る", "fastapi"),  # full-width forms
    ],
)
def test_another_form_of_a_word_meets_the_note(note: str, query: str) -> None:
    assert shared(note, query)


@pytest.mark.parametrize(
    ("note", "query", "terms"),
    [
        # Japanese: a verb by its dictionary form (character pairs share only `フィ`...`ルド`)
        ("送られたフィールドを保存します。", "フィールドを送る", {"フィールド", "送る"}),
        # ... a loanword with or without its final long vowel mark, both in use
        ("パラメーターを検証する。", "パラメータ", {"パラメータ"}),
        # Chinese: words, not the pairs across their boundaries (和|尚未: no monk, 和尚)
        ("结婚的和尚未结婚的", "和尚", set()),
        ("我们检查了蜂箱里的蜂蜜储量。", "检查蜂蜜", {"检查", "蜂蜜"}),
    ],
)
def test_japanese_and_chinese_meet_a_note_by_its_words(
    note: str, query: str, terms: set[str]
) -> None:
    assert shared(note, query) == terms


def test_a_german_compound_meets_another_compound_with_a_part_of_it() -> None:
    note = "Wir prüfen die Datentypen aller Felder."  # Daten|typen
    assert shared(note, "Parametertypen verwenden") == {"typ"}  # Parameter|typen
    assert "zeit" in shared("Die Zeit steht im Header.", "Verarbeitungszeit")  # Verarbeitung|s|zeit


def test_a_common_german_word_is_not_split_into_parts() -> None:
    assert tokenize("Beispiel Abhängigkeiten Parameter", ("de",)) == ["beispiel", "abhang", "param"]


def test_a_korean_verb_meets_another_ending_of_it() -> None:
    assert "바꾸" in shared("보낸 필드만 바꿔서 저장한다.", "필드를 바꾸는 방법")  # 바꿔서, 바꾸는


def test_a_korean_word_is_indexed_without_its_particles_and_endings() -> None:
    # `하기` and `를` are on nearly every Korean page: they found every longer page
    assert tokenize("헤더를 추가하기", ("ko",)) == ["헤더", "추가"]


def test_a_stop_word_of_the_query_language_is_left_out_but_an_acronym_is_kept() -> None:
    assert tokenize("die Bienen und der Honig", ("de",)) == ["bien", "honig"]
    assert "die" in tokenize("DIE Bienen", ("de",))


def test_a_cyrillic_word_in_an_english_note_is_stemmed_as_russian() -> None:
    assert tokenize("the word ульи", ("en",)) == ["word", *tokenize("ульи", ("ru",))]


def test_a_cjk_query_counts_its_words_for_the_keyword_bonus() -> None:
    query = "レスポンスを返した後にメール通知を送る"  # one run of 19 characters, 6 words
    assert len(query_vector(query).indices) == 6
    assert query_words(query) == query_vector(query).words == 6
    assert query_words("벌통에서 꿀을", "ko") == 2  # a word, not its particle


def test_a_query_in_kanji_alone_meets_a_japanese_note_by_its_words() -> None:
    # Han without kana is taken for Chinese; jieba splits Japanese 処理時間 as 処|理時間
    assert shared("リクエストの処理時間を計測します。", "処理時間") == {"処理", "時間"}
    assert query_languages("環境変数") == ["zh", "ja", "en"]


def test_a_simplified_chinese_query_is_not_also_analysed_as_japanese() -> None:
    # IPADIC does not know 带, 默 or 认: it would index them one character at a time
    assert query_languages("带默认值的可选参数") == ["zh", "en"]


def test_a_word_searched_in_two_languages_counts_once() -> None:
    vector = query_vector("Bienenvölker überwintern")  # German and English forms of each word
    assert len(vector.indices) > 2 and vector.words == 2


def test_the_frontmatter_language_is_its_primary_subtag(tmp_path: Path) -> None:
    note = parse_note("---\nlang: pt-BR\n---\nTexto.\n", tmp_path / "a.md", "a.md")
    assert note.language == "pt"
    wrong = parse_note("---\nlanguage: [1]\n---\nText.\n", tmp_path / "b.md", "b.md")
    assert wrong.language is None and "language" in (wrong.notice or "")


def test_a_chunk_is_analysed_in_the_language_it_is_given() -> None:
    german = document_vector("Die Bienenvölker", "de")
    english = document_vector("Die Bienenvölker", "en")
    assert german.indices != english.indices
