import dataclasses
import json

import pytest
from helpers import free_port, script_module
from ingest_fixtures import (
    BREAD,
    KIMCHI,
    SHOCK,
    UNREACHABLE_EMBEDDER,
    ingest_notes,
    make_settings,
    run_script,
    script_env,
)
from mcp_fixtures import SNAPSHOT, ServerFactory
from qdrant_client import models

from kb.app.backend import embed_client, open_store
from kb.core.errors import CollectionMissing, KeywordIndexMissing, ModelMismatch
from kb.core.schema import DENSE, point_id
from kb.core.settings import Settings
from kb.embedding.client import EmbedClient, EmbedError
from kb.search import PARAMETERS, TOOL_MAX_K, SearchRequest
from kb.search.filters import FILTERS, KINDS, Filters
from kb.search.query import Hit, search, tag_usage
from kb.store import collection
from kb.store.points import Point

# a value of each shape of filter (kb.search.filters.VALUES), and one of each test for a
# Filters with every filter set at once
EXAMPLES = {"tags": "a,b", "date": "2024-03-01", "duration": "10m", "text": "x", "kind": "video"}
EVERY = {"any_tag": ["a"], "every_tag": ["b"], "since": "2024-01-01", "until": "2024-12-31",
         "folder": "x/", "kind": "video", "equals": "x", "least": "1m", "most": "10m",
         "within": "read later", "address": "ana@example.com"}  # fmt: skip


EXTRA = {
    "garden/tomatoes.md": "---\ntags: [garden]\n---\nWater tomato plants at the root every "
    "morning and pinch out the side shoots.\n",
    "garden/roses.md": "---\ntags: [Garden, flowers]\n---\nPrune roses in early spring "
    "just above an outward-facing bud.\n",
    "python.md": "---\ntags: [code]\n---\nUse a context manager to make sure files are "
    "closed even when an exception is raised.\n",
    "trains.txt": "The night train leaves the central station at 22:40 and arrives at 7:15.\n",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder_url: str) -> Settings:
    """Seven notes ingested into embedded Qdrant once for the module (store closed after)."""
    notes = {"food/kimchi.md": KIMCHI, "bread.txt": BREAD, "shock.md": SHOCK, **EXTRA}
    assert len(notes) == 7
    return ingest_notes(tmp_path_factory.mktemp("query"), embedder_url, notes)


def test_query_prints_the_five_closest_chunks_with_score_source_and_text(corpus, tmp_path):
    result = run_script(
        "query.py", "how do I ferment cabbage?", env=script_env(corpus), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    ranks = [line for line in lines if line[:1].isdigit()]
    assert len(ranks) == 5
    assert ranks[0].startswith("1. ")
    assert "food/kimchi.md:6-9  [korean cuisine, recipes]" in ranks[0]
    score = float(ranks[0].split()[1])
    assert 0 < score <= 1
    assert lines[1].strip().startswith("# Kimchi Salt a napa cabbage")  # start of the chunk


def test_query_json_has_the_search_fields_and_honours_k_and_tags(corpus, tmp_path):
    args = ["pruning in spring", "--json", "-k", "2", "--tags", "GARDEN", "--tags", "code,x"]
    result = run_script("query.py", *args, env=script_env(corpus), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    results = json.loads(result.stdout)["results"]
    assert len(results) == 2
    assert all(set(r) == {f.name for f in dataclasses.fields(Hit)} for r in results)
    assert results[0]["source"] == "garden/roses.md"
    assert results[0]["tags"] == ["garden", "flowers"]
    assert all({"garden", "code"} & set(r["tags"]) for r in results)
    with open_store(corpus) as store, embed_client(corpus) as client:
        hits = search(
            store, client, "pruning in spring", k=2, filters=Filters(tags=["garden", "code", "x"])
        )
    for hit, shown in zip(hits, results, strict=True):
        # confidence and stale come from the search entry (kb.search.entry), not the first stage
        assert 0.0 <= shown["confidence"] <= 1.0 and shown["stale"] is False
        # and each note's backlink count (none here)
        made = {"score": pytest.approx(hit.score, abs=1e-5), "confidence": shown["confidence"],
                "stale": False, "links_in": 0}  # fmt: skip
        assert {**hit.to_dict(), **made} == shown


def test_query_without_results_for_a_tag_says_so(corpus, tmp_path):
    result = run_script("query.py", "bread", "--tags", "nope", env=script_env(corpus), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "no results\n")


def test_query_exits_with_one_error_line_when_the_embedder_is_down(corpus, tmp_path):
    env = script_env(corpus, EMBED_URL=UNREACHABLE_EMBEDDER)
    result = run_script("query.py", "bread", env=env, cwd=tmp_path)
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: embedder at {UNREACHABLE_EMBEDDER} unreachable")
    assert result.stdout == ""


def test_query_exits_with_one_error_line_when_qdrant_is_down(corpus, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    env = script_env(corpus)
    del env["QDRANT_PATH"]
    env["QDRANT_URL"] = url
    result = run_script("query.py", "bread", env=env, cwd=tmp_path)
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: Qdrant at {url} (QDRANT_URL) is unreachable")


def test_query_before_any_ingest_says_to_ingest_first(settings, embedder_url, tmp_path):
    result = run_script(
        "query.py", "bread", env=script_env(settings, EMBED_URL=embedder_url), cwd=tmp_path
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"error: collection 'notes' does not exist in embedded Qdrant in "
        f"{settings.QDRANT_PATH} (QDRANT_PATH); ingest notes first: uv run ingest.py\n"
    )


# query.py as a user runs it; the MCP fixtures' corpus (kimchi, bread, tomatoes, rust ...)
SERVER_QUERIES = [
    ["how do I make kimchi?"],
    ["ownership", "--mode", "keyword", "-k", "3", "--tags", "programming", "--per-note", "0"],
    ["garden", "--from", "2023-01-01", "--to", "2023-12-31", "--json"],
]


def test_query_asks_the_mcp_server_that_holds_the_embedded_store_and_prints_the_same(
    tmp_path, embedder_url: str, start_server: ServerFactory, store_copy
):
    qdrant = store_copy()
    settings = make_settings(tmp_path, embedder_url, QDRANT_PATH=str(qdrant))
    alone = [
        run_script("query.py", *q, env=script_env(settings), cwd=tmp_path) for q in SERVER_QUERIES
    ]
    assert all(r.returncode == 0 and r.stdout for r in alone), [r.stderr for r in alone]

    # it opens the store, and announces itself in STATE_DIR/server.json: query.py finds it there
    server = start_server(EMBED_URL=embedder_url, QDRANT_PATH=str(qdrant),
                          STATE_DIR=str(settings.STATE_DIR))  # fmt: skip
    env = script_env(settings)
    held = [run_script("query.py", *q, env=env, cwd=tmp_path) for q in SERVER_QUERIES]

    for before, now in zip(alone, held, strict=True):
        assert (now.returncode, now.stderr) == (0, ""), now.stderr
        if now.stdout.startswith("{"):
            expected = json.loads(before.stdout)["results"]
            for hit in expected:
                hit["score"] = pytest.approx(hit["score"], abs=1e-5)
            assert json.loads(now.stdout)["results"] == expected
        else:
            assert now.stdout == before.stdout
    assert server.log.count("search_notes k=") == len(SERVER_QUERIES)  # answered by the server


def test_query_through_the_mcp_server_sends_the_token(
    tmp_path, embedder_url: str, start_server: ServerFactory, store_copy
):
    qdrant = str(store_copy())
    settings = make_settings(tmp_path, embedder_url, QDRANT_PATH=qdrant)
    start_server(EMBED_URL=embedder_url, QDRANT_PATH=qdrant, MCP_TOKEN="query-token-5e",
                 STATE_DIR=str(settings.STATE_DIR))  # fmt: skip
    env = script_env(settings, MCP_TOKEN="query-token-5e")
    result = run_script("query.py", "kimchi", env=env, cwd=tmp_path)
    assert result.returncode == 0 and "cooking/kimchi.md" in result.stdout, result.stderr

    result = run_script("query.py", "kimchi", env={**env, "MCP_TOKEN": "wrong"}, cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith(f"error: {qdrant} is held by the MCP server") and "bearer token" in line


def test_query_says_what_to_do_when_the_store_is_held_by_a_process_that_is_no_server(
    tmp_path, embedder_url: str, store_copy
):
    settings = make_settings(tmp_path, embedder_url, QDRANT_PATH=str(store_copy()))
    with open_store(settings):  # held by another process, as by a running ingest
        result = run_script("query.py", "kimchi", env=script_env(settings), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: embedded Qdrant in {settings.QDRANT_PATH}")
    assert "is in use by another process" in line and "stop it first" in line


def test_points_written_by_older_versions_come_back_with_empty_tags_and_null_fields(
    settings, client
):
    with open_store(settings) as store:
        collection.create(store, client.model, client.dimensions)
        [vector] = client.embed_documents(["Sourdough needs a lively starter."])
        old = {"text": "Sourdough needs a lively starter.", "source": "old.md"}
        store.replace([Point(point_id("old.md", 0), vector, old)], ["old.md"])
        [hit] = search(store, client, "sourdough starter", k=3, mode="semantic")
        [hybrid] = search(store, client, "sourdough starter", k=3)
    assert hit.to_dict() == {
        "text": "Sourdough needs a lively starter.",
        "source": "old.md",
        "score": pytest.approx(hit.score),
        "tags": [],
        "topic": None,
        "document_date": None,
        "date_ingested": None,
        "chunk_index": None,
        "line_start": None,
        "line_end": None,
        "char_start": None,
        "char_end": None,
        "title": None,
        "heading_path": [],
        "hidden_chars_removed": 0,
        # a point stored before videos existed reads as a note, without a video's fields
        "kind": "note",
        "channel": None,
        "url": None,
        "duration_s": None,
        "view_count": None,
        "uploaded": None,
        "categories": [],
        "language": None,
        "thumbnail": None,
        "rerank_score": None,  # made by the rerank stage, which kb.search.query alone does not run
        "stale": None,  # set by kb.search.entry (kb.search.fresh), not by kb.search.query
        "confidence": None,  # likewise (kb.search.confidence)
        "explain": None,  # only asked for (explain: true)
        "locator": "",  # points written before locators: none, and prose
        "domain": "prose",
        "site": None,  # a web page's fields: none
        "author": None,
        "fetched_at": None,
        "bookmark_folders": [],
        "aliases": [],  # points written before the vault's graph: no names, no links
        "links_out": 0,
        "links_in": None,  # counted by the search entry, which kb.search.query alone is not
        "uri": "notes:///old.md",  # the whole note: no lines stored
    }
    assert hit.score > 0.5  # cosine similarity in semantic mode
    assert hybrid.source == "old.md"  # found by meaning although it has no keyword vector


def test_a_collection_from_before_keyword_search_still_answers_semantic_queries_and_says_to_rebuild(
    settings, embedder_url, client, tmp_path
):
    with open_store(settings) as store:
        # the layout the previous version created: one dense vector, no keyword vector
        store.create_collection(
            dense={
                DENSE: models.VectorParams(size=client.dimensions, distance=models.Distance.COSINE)
            },
            sparse={},
            metadata={"embed_model": client.model, "embed_dimensions": client.dimensions},
        )
        [vector] = client.embed_documents(["Sourdough needs a lively starter."])
        payload = {"text": "Sourdough needs a lively starter.", "source": "old.md"}
        store.replace([Point(point_id("old.md", 0), vector, payload)], ["old.md"])
        [hit] = search(store, client, "sourdough", mode="semantic")
        assert hit.source == "old.md"
        for mode in ("hybrid", "keyword"):
            with pytest.raises(KeywordIndexMissing, match=r"older version.*--rebuild"):
                search(store, client, "sourdough", mode=mode)
    result = run_script(
        "query.py", "sourdough", env=script_env(settings, EMBED_URL=embedder_url), cwd=tmp_path
    )
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("error: collection 'notes'") and "uv run ingest.py --rebuild" in line
    semantic = run_script(
        "query.py",
        "sourdough",
        "--mode",
        "semantic",
        env=script_env(settings, EMBED_URL=embedder_url),
        cwd=tmp_path,
    )
    assert semantic.returncode == 0 and "old.md" in semantic.stdout


def test_search_rejects_an_empty_query_and_k_out_of_range(corpus):
    with open_store(corpus) as store, embed_client(corpus) as client:
        with pytest.raises(ValueError, match="query is empty"):
            search(store, client, "  ")
        for k in (0, 101):
            with pytest.raises(ValueError, match="k must be between 1 and 100"):
                search(store, client, "bread", k=k)
        assert len(search(store, client, "bread", k=100)) == 7


def test_search_refuses_a_collection_built_by_another_model(settings, client):
    with open_store(settings) as store:
        collection.create(store, "another-model", client.dimensions)
        with pytest.raises(ModelMismatch, match=r"`uv run ingest\.py` rebuilds it"):
            search(store, client, "bread")


def test_search_and_list_tags_on_a_missing_collection_say_to_ingest_first(settings, client):
    with open_store(settings) as store:
        with pytest.raises(CollectionMissing, match="ingest notes first"):
            search(store, client, "bread")
        with pytest.raises(CollectionMissing, match="ingest notes first"):
            tag_usage(store)


def test_search_propagates_embedder_errors(corpus):
    with (
        open_store(corpus) as store,
        EmbedClient(UNREACHABLE_EMBEDDER, retries=0) as down,
        pytest.raises(EmbedError, match="unreachable"),
    ):
        search(store, down, "bread")


def test_tag_usage_counts_notes_per_tag_most_used_first(corpus):
    with open_store(corpus) as store:
        assert [(u.tag, u.notes) for u in tag_usage(store)] == [
            ("garden", 2),
            ("aerodynamics", 1),
            ("code", 1),
            ("flowers", 1),
            ("korean cuisine", 1),
            ("recipes", 1),
        ]


def test_query_py_has_an_option_for_every_filter_and_keeps_from_and_to():
    script = script_module("query.py")
    for spec in FILTERS:
        for option in spec.options:
            _, request = script.parse_args(["anything", option, EXAMPLES[spec.value]])
            assert getattr(request.filters, spec.name) not in (None, ()), option
    spelled = {spec.name: spec.options for spec in FILTERS}
    assert spelled["date_from"] == ("--from", "--date-from")
    assert spelled["date_to"] == ("--to", "--date-to")
    assert spelled["all_tags"] == ("--all-tags",) and spelled["min_duration"] == ("--min-duration",)


def test_query_py_takes_every_kind_the_tools_take():
    script = script_module("query.py")
    for kind in KINDS:
        _, request = script.parse_args(["anything", "--kind", kind])
        assert request.filters.kind == kind


def test_a_search_through_the_mcp_server_sends_every_filter_by_its_argument_name():
    from kb.app import remote

    filters = Filters(**{spec.name: EVERY[spec.test] for spec in FILTERS})
    sent = remote.arguments(SearchRequest("q", 30, filters=filters, per_note=None, rerank=False))
    [tool] = [t for t in json.loads(SNAPSHOT.read_text()) if t["name"] == "search_notes"]
    assert {spec.name for spec in FILTERS} <= set(sent) <= set(tool["inputSchema"]["properties"])
    assert (sent["tags"], sent["path"], sent["min_duration"]) == (["a"], "x", 60)
    assert (sent["k"], sent["per_note"], sent["rerank"]) == (30, 0, False)  # the tool clamps k


def test_a_result_from_the_mcp_server_reads_back_as_the_hit_it_was_with_its_uri_remade():
    from pydantic import TypeAdapter

    from kb.app import remote

    hit = Hit(text="t", source="a b/ü.md", score=0.5, line_start=2, line_end=3)
    sent = TypeAdapter(Hit).dump_python(hit, mode="json")  # what search_notes returns
    assert sent["uri"] == "notes:///a%20b/%C3%BC.md?lines=2-3"
    assert remote.hit_of(sent) == hit


# a value of each shape of search parameter (kb.search.parameters.Shape) as query.py takes it,
# and what the SearchRequest then holds
GIVEN = {"count": ("7", 7), "limit": ("0", None), "texts": ("keyword: x", ("keyword: x",)),
         "switch": (None, True), "toggle": (None, False), "chars": ("500", 500)}  # fmt: skip


def test_query_py_has_an_option_for_every_search_parameter():
    script = script_module("query.py")
    for spec in PARAMETERS:
        given, held = GIVEN[spec.shape] if spec.shape in GIVEN else (spec.choices[-1],) * 2
        _, request = script.parse_args(["q", spec.option, *([given] if given else [])])
        assert getattr(request, spec.name) == held, spec.option
    _, plain = script.parse_args(["q"])
    assert {s.name: getattr(plain, s.name) for s in PARAMETERS} == {
        s.name: s.default for s in PARAMETERS
    }


def test_every_search_parameter_is_a_search_notes_argument_with_its_line_and_default():
    [tool] = [t for t in json.loads(SNAPSHOT.read_text()) if t["name"] == "search_notes"]
    schema = tool["inputSchema"]["properties"]
    for spec in PARAMETERS:
        assert schema[spec.name]["description"] == spec.described(TOOL_MAX_K), spec.name
        default = None if spec.shape == "texts" else spec.argument(spec.default)
        assert schema[spec.name].get("default") == default, spec.name


def test_a_search_through_the_mcp_server_sends_every_parameter_that_is_not_its_default():
    from kb.app import remote

    asked = SearchRequest("q", 7, mode="keyword", per_note=None, alternates=["x"],
                          domain="code", rerank=False, explain=True, max_chars=500)  # fmt: skip
    assert remote.arguments(asked) == {
        "query": "q", "k": 7, "mode": "keyword", "per_note": 0, "alternates": ["x"],
        "domain": "code", "rerank": False, "explain": True, "max_chars": 500,
    }  # fmt: skip
    assert remote.arguments(SearchRequest("q")) == {"query": "q"}
