"""Search filters and per-note collapsing, through real ingest, embeddings and embedded Qdrant."""

import dataclasses
import json
from collections.abc import Iterator

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import count_points, ingest_notes, run_script, script_env

from kb.app.backend import embed_client, open_store
from kb.core.schema import PAYLOAD_INDEXES
from kb.core.settings import Settings
from kb.embedding.client import EmbedClient
from kb.search import SearchRequest
from kb.search.filters import FILTERS, Filters
from kb.search.query import search
from kb.store.points import Store


def garden_log(days: int) -> str:
    """A long note of dated sections about tomatoes: one chunk per day."""
    entry = " ".join(
        f"Tomato plants watered and tied, note {i} on their growth." for i in range(22)
    )
    return "# Garden log\n\n" + "".join(f"## Day {d}\n\n{entry} Day {d}.\n\n" for d in range(days))


NOTES = {
    "recipes/korean/kimchi.md": "---\ntags: [Korean Cuisine, fermentation]\n"
    "document_date: 2024-03-01\n---\n# Kimchi\n\nSalt the cabbage, rub in chilli paste and "
    "ferment the tomato-free kimchi for two days.\n",
    "recipes/sauerkraut.md": "---\ntags: [fermentation]\ndocument_date: 2024-03-15T18:30:00\n"
    "---\n# Sauerkraut\n\nShred cabbage, salt it and ferment it in a crock for three weeks.\n",
    "recipes/salsa.md": "---\ntags: [mexican]\ndocument_date: 2023-07-04\n---\n# Salsa\n\n"
    "Chop tomato, onion and chilli; season with lime and salt.\n",
    "garden/tomatoes.md": "---\ntags: [garden]\ndocument_date: 2024-06-01\n---\n" + garden_log(6),
    "garden/herbs.md": "---\ntags: [garden, kitchen]\n---\n# Herbs\n\nBasil next to the "
    "tomato plants keeps pests away.\n",
    "recipes.md": "# Recipes index\n\nTomato soup, salsa and kimchi are my favourites.\n",
}
# when each note was ingested (set after the ingest: one run stamps every note alike)
INGESTED = {
    "recipes/korean/kimchi.md": "2024-05-01T09:00:00+00:00",
    "recipes/sauerkraut.md": "2024-05-02T23:30:00+00:00",
    "recipes/salsa.md": "2024-05-03T00:10:00+00:00",
}


@pytest.fixture(scope="module")
def corpus(
    tmp_path_factory: pytest.TempPathFactory, embedder_transport: httpx.BaseTransport
) -> Settings:
    settings = ingest_notes(
        tmp_path_factory.mktemp("search"), IN_PROCESS_EMBED_URL, NOTES, embedder_transport
    )
    with open_store(settings) as store:
        assert count_points(store, "garden/tomatoes.md") == 6
        store.set_fields({source: {"date_ingested": stamp} for source, stamp in INGESTED.items()})
    return settings


@pytest.fixture
def opened(corpus: Settings, embedder_transport) -> Iterator[tuple[Store, EmbedClient]]:
    with open_store(corpus) as store, embed_client(corpus, transport=embedder_transport) as client:
        yield store, client


def found(opened, query: str = "tomato", *, mode="hybrid", k=20, **filters) -> set[str]:
    store, client = opened
    hits = search(store, client, query, k, mode=mode, filters=Filters(**filters))
    return {hit.source for hit in hits}


RECIPES = {"recipes/korean/kimchi.md", "recipes/sauerkraut.md", "recipes/salsa.md"}


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("hybrid", {"recipes/korean/kimchi.md", "recipes/salsa.md"}),
        ("semantic", {"recipes/korean/kimchi.md", "recipes/salsa.md"}),
        # only notes containing the word: sauerkraut has cabbage too, but neither tag
        ("keyword", {"recipes/korean/kimchi.md"}),
    ],
)
def test_tags_keeps_notes_with_at_least_one_tag_in_every_mode(opened, mode, expected):
    assert found(opened, "cabbage", mode=mode, tags=["Korean  cuisine", "MEXICAN"]) == expected


def test_all_tags_keeps_only_notes_with_every_tag(opened):
    assert found(opened, all_tags=["garden"]) == {"garden/tomatoes.md", "garden/herbs.md"}
    assert found(opened, all_tags=["garden", "kitchen"]) == {"garden/herbs.md"}
    assert found(opened, all_tags=["garden", "mexican"]) == set()
    assert found(opened, tags=["garden", "mexican"], all_tags=["kitchen"]) == {"garden/herbs.md"}


def test_document_date_range_with_bare_dates_includes_whole_days(opened):
    assert found(opened, date_from="2024-03-01", date_to="2024-03-15") == {
        "recipes/korean/kimchi.md",
        "recipes/sauerkraut.md",  # 18:30 on the last day counts
    }
    assert found(opened, date_to="2024-02-29") == {"recipes/salsa.md"}
    assert found(opened, date_from="2024-03-02") == {"recipes/sauerkraut.md", "garden/tomatoes.md"}
    # notes without a document_date never match a date filter
    assert "garden/herbs.md" not in found(opened, date_from="1900-01-01")


def test_datetime_bounds_are_exact_and_naive_ones_are_utc(opened):
    assert found(opened, date_from="2024-03-15T18:30:00", date_to="2024-03-15T18:30") == {
        "recipes/sauerkraut.md"
    }
    assert found(opened, date_from="2024-03-15T18:30:01") == {"garden/tomatoes.md"}
    assert found(opened, date_to="2024-03-15T19:30:00+01:00", date_from="2024-03-15") == {
        "recipes/sauerkraut.md"
    }


def test_ingest_date_range_filters_on_when_notes_were_ingested(opened):
    assert found(opened, ingested_from="2024-05-01", ingested_to="2024-05-02") == {
        "recipes/korean/kimchi.md",
        "recipes/sauerkraut.md",
    }
    assert found(opened, ingested_from="2024-05-02T23:00Z", ingested_to="2024-05-03T00:00Z") == {
        "recipes/sauerkraut.md"
    }
    # the others were ingested by the fixture's run, today
    assert found(opened, ingested_from="2025-01-01") == set(NOTES) - set(INGESTED)


def test_path_keeps_a_folder_at_any_depth_or_one_note(opened):
    assert found(opened, path="recipes/") == RECIPES
    assert found(opened, path="recipes") == RECIPES  # recipes.md is not in the folder
    assert found(opened, path="./recipes/korean") == {"recipes/korean/kimchi.md"}
    assert found(opened, path="recipes/salsa.md") == {"recipes/salsa.md"}
    assert found(opened, path="recipes.md") == {"recipes.md"}
    assert found(opened, path="rec") == set()  # a folder or a file, not a name prefix


def test_filters_combine_with_and(opened):
    assert found(
        opened, "cabbage", path="recipes", tags=["fermentation"], date_from="2024-03-10"
    ) == {"recipes/sauerkraut.md"}


@pytest.mark.parametrize(
    ("field", "value"),
    [("date_from", "yesterday"), ("date_to", "2024-13-01"), ("ingested_from", "2024/05/01")],
)
def test_an_invalid_date_is_refused_naming_the_field_and_the_value(field, value):
    with pytest.raises(ValueError, match=f"{field}: '{value}' is not an ISO date"):
        Filters(**{field: value})


def test_a_range_that_ends_before_it_starts_is_refused():
    with pytest.raises(ValueError, match="date_from '2024-05-02' is after date_to '2024-05-01'"):
        Filters(date_from="2024-05-02", date_to="2024-05-01")
    Filters(date_from="2024-05-01", date_to="2024-05-01")  # one whole day is fine


def test_results_are_distinct_notes_by_default_and_per_note_caps_chunks_per_note(opened):
    store, client = opened
    query = "watering and tying up tomato plants"
    default = search(store, client, query, 5)
    assert len(default) == 5 and len({h.source for h in default}) == 5
    assert default[0].source == "garden/tomatoes.md"
    two = search(store, client, query, 5, per_note=2)
    sources = [h.source for h in two]
    assert len(two) == 5 and sources.count("garden/tomatoes.md") == 2
    assert all(sources.count(s) <= 2 for s in sources)
    plain = search(store, client, query, 5, per_note=None)
    assert [h.source for h in plain] == ["garden/tomatoes.md"] * 5  # the six days fill it
    assert [h.score for h in plain] == sorted((h.score for h in plain), reverse=True)
    assert [h.source for h in search(store, client, query, 5, per_note=0)] == [
        h.source for h in plain
    ]


def test_hits_carry_the_heading_path_and_line_range_of_their_chunk(opened):
    store, client = opened
    [hit] = search(
        store,
        client,
        "tomato plants watered Day 4",
        1,
        per_note=1,
        mode="keyword",
        filters=Filters(path="garden/tomatoes.md"),
    )
    assert hit.heading_path[0] == "Garden log" and hit.heading_path[1].startswith("Day ")
    assert hit.title == "Garden log"
    lines = NOTES["garden/tomatoes.md"].splitlines()[hit.line_start - 1 : hit.line_end]
    assert lines[0] == f"## {hit.heading_path[1]}"


def test_the_tags_filter_keeps_notes_with_any_of_these_tags(opened):
    store, client = opened
    hits = search(store, client, "tomato", 10, filters=Filters(tags=["Mexican"]))
    assert {h.source for h in hits} == {"recipes/salsa.md"}
    both = search(store, client, "tomato", 10, filters=Filters(tags=["mexican", "kitchen"]))
    assert {h.source for h in both} == {"recipes/salsa.md", "garden/herbs.md"}


def test_search_rejects_an_unknown_mode_and_a_negative_per_note(opened):
    store, client = opened
    with pytest.raises(ValueError, match="mode must be one of hybrid, semantic, keyword"):
        search(store, client, "x", mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="per_note"):
        search(store, client, "x", per_note=-1)


def test_query_script_applies_every_filter_option(corpus, tmp_path, embedder_url):
    env = script_env(corpus, EMBED_URL=embedder_url)

    def sources(*args: str) -> list[str]:
        result = run_script(
            "query.py", "tomato", "-k", "20", "--json", *args, env=env, cwd=tmp_path
        )
        assert result.returncode == 0, result.stderr
        return sorted(r["source"] for r in json.loads(result.stdout)["results"])

    assert sources("--all-tags", "garden,kitchen") == ["garden/herbs.md"]
    assert sources("--tags", "mexican", "--tags", "kitchen") == [
        "garden/herbs.md",
        "recipes/salsa.md",
    ]
    assert sources("--from", "2024-03-01", "--to", "2024-03-15") == [
        "recipes/korean/kimchi.md",
        "recipes/sauerkraut.md",
    ]
    assert sources("--ingested-from", "2024-05-03", "--ingested-to", "2024-05-03") == [
        "recipes/salsa.md"
    ]
    assert sources("--path", "recipes/korean/") == ["recipes/korean/kimchi.md"]
    assert (
        sources("--path", "garden", "--per-note", "0", "--mode", "keyword").count(
            "garden/tomatoes.md"
        )
        == 6
    )


def test_query_script_names_the_option_with_a_bad_date(corpus, tmp_path, embedder_url):
    result = run_script(
        "query.py",
        "tomato",
        "--from",
        "someday",
        env=script_env(corpus, EMBED_URL=embedder_url),
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "error: --from: 'someday' is not an ISO date" in result.stderr
    assert result.stdout == ""


def test_a_search_request_refuses_a_bad_value_naming_the_field():
    for values, message in [
        ({"query": "  "}, "query is empty"),
        ({"k": 0}, "k must be between 1 and 100"),
        ({"k": 101}, "k must be between 1 and 100"),
        ({"mode": "fuzzy"}, "mode must be one of hybrid, semantic, keyword"),
        ({"per_note": -1}, "per_note"),
        ({"domain": "everything"}, "domain must be one of all, prose, code"),
        ({"alternates": ["fine", "keyword: "]}, r"alternates\[1\] is empty"),
    ]:
        with pytest.raises(ValueError, match=message):
            SearchRequest(**{"query": "q", **values})


def test_every_filter_is_one_field_of_filters_on_a_payload_field_a_server_indexes():
    assert [spec.name for spec in FILTERS] == [f.name for f in dataclasses.fields(Filters)]
    for spec in FILTERS:
        assert spec.help.endswith(".") and "\n" not in spec.help, spec.name
        assert not spec.payload or spec.payload in PAYLOAD_INDEXES, spec.name
    assert Filters().where() is None  # no filter, no condition
