import os
import subprocess
import sys

import pytest
from helpers import REPO_ROOT

from kb.embedding.keywords import document_vector, is_lookup, query_vector, term_id, tokenize


def test_snake_case_dotted_names_and_paths_are_kept_whole_and_split_into_parts():
    terms = tokenize("call kb.store.points.upsert_points in src/app/main.py")
    assert "kb.store.points.upsert_points" in terms
    assert {"kb", "store", "upsert", "point"} <= set(terms)
    assert "src/app/main.py" in terms
    assert {"src", "app", "main", "py"} <= set(terms)


def test_a_method_or_file_named_alone_matches_where_it_is_written_qualified():
    # `enqueue_many` is a term of `job.enqueue_many(...)`, `main.py` of `src/app/main.py`
    terms = tokenize("see job.enqueue_many(rows) in src/app/main.py")
    assert {"job.enqueue_many", "enqueue_many", "src/app/main.py", "main.py"} <= set(terms)
    query = set(query_vector("enqueue_many").indices)
    assert term_id("enqueue_many") in query & set(document_vector("job.enqueue_many()").indices)
    # a piece of one word is not a term of its own: `main` and `py` are already words
    assert terms.count("main") == 1 and "app/main.py" not in terms


def test_a_query_of_identifiers_codes_and_acronyms_is_a_lookup_and_prose_is_not():
    for lookup in ["TaxRuleChosen", "INC-1187", "WCAG AA", "job.enqueue_many", "the HbA1c"]:
        assert is_lookup(lookup) and query_vector(lookup).lookup, lookup
    for prose in ["how to pause a queue", "pg_upgrade --link", "well-known", "Python", "", "东京"]:
        assert not is_lookup(prose) and not query_vector(prose).lookup, prose
    assert not document_vector("TaxRuleChosen").lookup  # a query's mark only


@pytest.mark.timeout(60)
def test_a_query_of_one_very_long_word_is_read_in_linear_time():
    # a backtracking pattern took ~50 s on a 100,000-letter query (the MCP fuzz test's)
    for word in ("q" * 1_000_000, "Q" + "q" * 1_000_000):
        query_vector(word)


def test_camel_case_identifiers_match_their_words():
    terms = tokenize("HTTPServerError from getUserName")
    assert {"httpservererror", "http", "server", "error", "getusername", "user", "name"} <= set(
        terms
    )


def test_a_plural_acronym_meets_its_singular_in_every_language():
    for language in ("en", "de", "es"):
        for plural, singular in (("URLs", "URL"), ("APIs", "API"), ("UUIDs", "UUID")):
            assert tokenize(plural, (language,)) == tokenize(singular, (language,))
    assert {"get", "url", "list"} <= set(tokenize("getURLsList"))


def test_words_are_case_folded_and_stemmed_and_stopwords_dropped():
    assert tokenize("The Running flows") == ["run", "flow"]


def test_numbers_and_versions_are_exact_terms():
    terms = tokenize("port 8080 on v2.3")
    assert "8080" in terms
    assert "v2.3" in terms


def test_japanese_and_chinese_text_becomes_its_words_in_their_dictionary_forms():
    assert tokenize("東京タワーに行きました", ("ja",)) == ["東京", "タワー", "行く"]
    assert tokenize("红烧肉很好吃", ("zh",)) == ["红烧肉", "很", "好吃"]


def test_a_stored_chinese_word_is_indexed_by_its_shorter_words_too():
    assert tokenize("一位老和尚", ("zh",), stored=True) == ["一位", "和尚", "老和尚"]
    assert tokenize("一位老和尚", ("zh",)) == ["一位", "老和尚"]  # a query: the word it means


def test_a_cjk_run_in_a_text_of_another_language_is_segmented_by_its_script():
    assert tokenize("Tokyo 東京タワーに行きました", ("en",)) == ["tokyo", "東京", "タワー", "行く"]
    assert tokenize("the dish 红烧肉", ("en",)) == ["dish", "红烧肉"]


def test_a_korean_word_becomes_its_content_morphemes():
    assert tokenize("김치찌개를 끓였다") == ["김치찌개", "끓이"]


def test_document_weights_saturate_with_term_frequency():
    once = document_vector("kimchi")
    many = document_vector("kimchi kimchi kimchi kimchi")
    assert many.values[0] > once.values[0]
    assert many.values[0] < 4 * once.values[0]


def test_query_vector_has_each_distinct_term_once_with_unit_weight():
    vec = query_vector("wing wing flow")
    assert sorted(vec.indices) == sorted({term_id("wing"), term_id("flow")})
    assert vec.values == [1.0, 1.0]


# Ids already stored in users' collections: a change here silently breaks keyword search on
# every collection built before it (a rebuild would be needed).
STORED_IDS = {"wing": 2719846924, "kimchi": 1522358599, "8080": 2524523545, "東京": 1168149181}


def test_term_ids_are_the_same_in_every_process_and_version():
    assert {term: term_id(term) for term in STORED_IDS} == STORED_IDS
    # another process with another string-hash seed computes the same ids
    terms = list(STORED_IDS)
    code = f"from {term_id.__module__} import term_id; print([term_id(t) for t in {terms!r}])"
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout.strip() == str(list(STORED_IDS.values()))
    assert all(0 <= term_id(term) < 2**32 for term in ["", "x" * 1000, *STORED_IDS])


def test_question_words_and_modal_verbs_are_stopwords():
    assert tokenize("What should I do when it will not start?") == ["start"]


def test_an_all_caps_acronym_is_kept_even_when_it_spells_a_stopword():
    assert tokenize("The IT team checked the CAN bus") == ["it", "team", "check", "can", "bus"]
    assert tokenize("it can") == []
