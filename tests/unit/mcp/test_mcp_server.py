"""The MCP server as Claude Code meets it: the SDK's streamable-HTTP client, an embedded Qdrant
folder filled by the real ingest code and the real MiniLM. The tools' answers come from the
server's app under uvicorn in this process (the embedder in this process too); what only the
process shows (`python mcp/server.py`: its log, an embedder down or loading, stdio, a store held
elsewhere) from the server and the embedder as processes."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import anyio
import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import REPO_ROOT, GatedModel, free_port
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_fixtures import (
    COLLECTION,
    NOTES,
    RPC_HEADERS,
    SERVER_SCRIPT,
    SNAPSHOT,
    TAG_COUNTS,
    IngestedNotes,
    InProcessServer,
    ServerFactory,
    ServerProcess,
    call_tool,
    error_text,
    list_tools,
    make_settings,
    results,
    search_rpc,
    serve_in_process,
    server_env,
    tool_answer,
)
from mcp_types import CallToolResult

from kb.app.backend import open_store
from kb.search.filters import FILTERS
from kb.store import collection

README = REPO_ROOT / "README.md"
# tools/list of the read-only tools, in characters of compact JSON as the client receives it
# (was 36.9k with output schemas; every session pays it before the first question)
TOOLS_LIST_BUDGET = 15_000
# what every passage of a note carries; a field with nothing to say (no topic) is left out
FIELDS = {"text", "source", "score", "title", "date_ingested", "line_start", "line_end"}
WHEN_GIVEN = {"heading_path", "tags", "topic", "document_date"}


# a server the tests talk to: in this process, or `python mcp/server.py`
Served = InProcessServer | ServerProcess


@pytest.fixture(scope="module")
def server(embedder_transport: httpx.BaseTransport, store_copy) -> Iterator[InProcessServer]:
    """The server's app over a copy of the ingested notes, on uvicorn in this process."""
    settings = make_settings(IN_PROCESS_EMBED_URL, store_copy(), MCP_PORT=free_port())
    with serve_in_process(settings, transport=embedder_transport) as served:
        yield served


def search(server: Served, query: str, **arguments) -> list[dict]:
    return results(call_tool(server.url, "search_notes", {"query": query, **arguments}))


def test_tools_list_matches_the_snapshot(server: Served) -> None:
    tools = list_tools(server.url)
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(tools, indent=2, sort_keys=True) + "\n")
    expected = json.loads(SNAPSHOT.read_text())
    assert tools == expected, (
        "the tool surface changed; if that is deliberate, rewrite the snapshot with "
        "UPDATE_SNAPSHOTS=1 pytest tests/unit/mcp/test_mcp_server.py"
    )


def test_tools_are_read_only_and_describe_how_to_use_them(server: Served) -> None:
    tools = {tool["name"]: tool for tool in list_tools(server.url)}
    # no MCP_WRITE_TOOLS
    assert set(tools) == {
        "search_notes",
        "browse_notes",
        "answer_question",
        "why_not_found",
        "read_note",
        "related_notes",
        "list_tags",
        "list_deleted",
        "status",
    }
    for tool in tools.values():
        assert tool["annotations"]["readOnlyHint"] is True
        assert "outputSchema" not in tool  # results are JSON text (docs/design/tool-surface.md)
    search_doc = tools["search_notes"]["description"]
    assert "unfiltered first" in search_doc and "list_tags" in search_doc
    assert "keyword" in search_doc and "line_start" in search_doc
    assert "before filtering" in tools["list_tags"]["description"]
    assert "restorable" in tools["list_deleted"]["description"]
    schema = tools["search_notes"]["inputSchema"]
    assert schema["required"] == ["query"]
    assert schema["properties"]["k"]["default"] == 5
    assert schema["properties"]["mode"]["default"] == "hybrid"
    assert schema["properties"]["per_note"]["default"] == 1


def test_the_whole_tools_list_fits_in_15k_characters_as_the_client_receives_it(
    server: Served,
) -> None:
    tools = list_tools(server.url)
    for tool in tools:
        print(f"{tool['name']:16} {len(json.dumps(tool, separators=(',', ':'))):6}")
    size = len(json.dumps(tools, separators=(",", ":")))
    print(f"tools/list {size} characters compact")
    assert size <= TOOLS_LIST_BUDGET


def test_every_searching_tool_takes_every_filter_and_search_notes_describes_each_once(
    server: Served,
) -> None:
    tools = {tool["name"]: tool["inputSchema"]["properties"] for tool in list_tools(server.url)}
    for name in ("search_notes", "browse_notes", "answer_question"):
        assert {spec.name for spec in FILTERS} <= set(tools[name]), name
    for spec in FILTERS:
        assert tools["search_notes"][spec.name]["description"] == spec.help
        described = [t for t, props in tools.items() if "description" in props.get(spec.name, {})]
        assert described == ["search_notes"], spec.name


def test_search_puts_the_answering_note_first_with_every_field(server: Served) -> None:
    hits = search(server, "how long do I ferment napa cabbage with chili paste?")
    assert hits[0]["source"] == "cooking/kimchi.md"
    for hit in hits:
        assert hit.keys() >= FIELDS
    top = hits[0]
    assert top.keys() >= FIELDS | WHEN_GIVEN
    assert "napa cabbage" in top["text"] and "tags:" not in top["text"]  # chunk text only
    assert top["tags"] == ["korean cuisine", "recipes"]
    assert top["topic"] == "How I make kimchi at home."
    assert top["document_date"] == "2024-03-01"
    assert datetime.fromisoformat(top["date_ingested"]).tzinfo is not None
    assert top["line_start"] >= 6  # after the frontmatter and the heading
    assert top["title"] == "Kimchi" and top["heading_path"] == ["Kimchi"]
    assert search(server, "pressure and density jump in supersonic flow")[0]["source"] == (
        "aero/shock-waves.txt"
    )


def test_results_are_ordered_by_score_and_k_is_clamped_to_1_to_20(
    server: Served, ingested_notes: IngestedNotes
) -> None:
    assert ingested_notes.chunks > 20
    for k, expected in [(3, 3), (0, 1), (-4, 1), (20, 20), (100, 20)]:
        hits = search(server, "notes about food", k=k)
        assert len(hits) == expected, k
        scores = [hit["score"] for hit in hits]
        assert scores == sorted(scores, reverse=True)
    assert len(search(server, "notes about food")) == 5  # the default


def test_concurrent_searches_all_get_their_own_answer(server: Served) -> None:
    queries = {
        "fermented napa cabbage": "cooking/kimchi.md",
        "knead the dough and bake a loaf": "cooking/bread.md",
        "tomato seedlings after the last frost": "garden/tomatoes.md",
        "borrow checker and ownership": "code/rust.md",
        "supersonic normal shock": "aero/shock-waves.txt",
        "waggle dance of honey bees": "misc/fact-01.txt",
    }
    answers: dict[str, str] = {}

    async def ask(client: httpx.AsyncClient, query: str) -> None:
        body = search_rpc(query, 1)
        response = await client.post(server.url, json=body, headers=RPC_HEADERS)
        answers[query] = results(CallToolResult.model_validate(response.json()["result"]))[0][
            "source"
        ]

    async def run() -> None:
        async with httpx.AsyncClient(timeout=60) as client, anyio.create_task_group() as group:
            for query in list(queries) * 3:
                group.start_soon(ask, client, query)

    anyio.run(run)
    assert answers == queries


def test_tag_filter_ignores_case_and_spacing(server: Served) -> None:
    # The query is about bread, but only the kimchi note carries the tag.
    for variant in ["korean cuisine", "  KOREAN   Cuisine ", "Korean\tcuisine"]:
        hits = search(server, "bake a loaf until the crust is brown", tags=[variant])
        assert [hit["source"] for hit in hits] == ["cooking/kimchi.md"], variant


def test_tag_filter_keeps_notes_with_any_of_the_tags(server: Served) -> None:
    hits = search(server, "something", k=20, tags=["Recipes"])
    assert {hit["source"] for hit in hits} == {"cooking/kimchi.md", "cooking/bread.md"}
    hits = search(server, "something", k=20, tags=["gardening", "PYTHON"])
    assert {hit["source"] for hit in hits} == {"garden/tomatoes.md", "code/pytest-fixtures.md"}
    assert search(server, "something", tags=["no such tag"]) == []


def test_list_tags_counts_chunks_and_notes_per_tag_most_chunks_first(
    server: Served,
) -> None:
    result = call_tool(server.url, "list_tags")
    assert not result.is_error
    tags = tool_answer(result)["tags"]
    assert sorted((t["tag"], t["notes"]) for t in tags) == sorted(TAG_COUNTS)
    assert [t["tag"] for t in tags] == [
        t["tag"] for t in sorted(tags, key=lambda t: (-t["chunks"], t["tag"]))
    ]
    for tag in tags:  # the chunks a tag filter reaches when passages are ranked alone
        hits = search(server, "notes", k=20, tags=[tag["tag"]], per_note=0)
        assert len(hits) < 20 and tag["chunks"] == len(hits), tag
    counts = {t["tag"]: t for t in tags}
    assert counts["python"]["notes"] == 1 < counts["python"]["chunks"]  # the long pytest note
    assert counts["programming"]["chunks"] == counts["python"]["chunks"] + 1  # + rust.md


def test_readme_describes_list_tags_as_the_server_answers(server: Served) -> None:
    [row] = [line for line in README.read_text().splitlines() if line.startswith("| `list_tags`")]
    tags = tool_answer(call_tool(server.url, "list_tags"))["tags"]
    names = [t["tag"] for t in tags]
    # on this corpus the two orders differ: the answer shows which count it is sorted by
    ordered_by = [
        count
        for count in ("chunks", "notes")
        if names == [t["tag"] for t in sorted(tags, key=lambda t: (-t[count], t["tag"]))]
    ]
    assert ordered_by == ["chunks"]
    assert "most passages first" in row, row
    assert "`chunks`" in row and "`notes`" in row, row


def test_keyword_mode_finds_exact_words_and_only_notes_that_contain_them(
    server: Served,
) -> None:
    hits = search(server, "gochugaru", mode="keyword")
    assert [hit["source"] for hit in hits] == ["cooking/kimchi.md"]
    assert hits[0]["score"] > 0  # BM25
    assert search(server, "1.e4 c5", mode="keyword")[0]["source"] == "misc/fact-04.txt"
    # A word no note contains: keyword finds nothing, the modes that rank by meaning still rank.
    assert search(server, "quokka", mode="keyword") == []
    for mode in ["semantic", "hybrid"]:
        hits = search(server, "quokka", mode=mode)
        assert len(hits) == 5 and all(-1 <= hit["score"] <= 1 for hit in hits), mode


def test_path_and_date_filters_keep_only_matching_notes(server: Served) -> None:
    hits = search(server, "how do I cook this", k=20, path="code/")
    assert {hit["source"] for hit in hits} == {"code/rust.md", "code/pytest-fixtures.md"}
    assert [h["source"] for h in search(server, "x", path="./garden/tomatoes.md")] == [
        "garden/tomatoes.md"
    ]
    assert search(server, "x", path="gard") == []  # whole folder names only
    year_2024 = search(server, "recipes", k=20, date_from="2024-01-01", date_to="2024-12-31")
    assert [hit["source"] for hit in year_2024] == ["cooking/kimchi.md"]
    assert [h["source"] for h in search(server, "plants", k=20, date_to="2023-06-10")] == [
        "garden/tomatoes.md"
    ]
    everything = search(server, "notes", k=20, ingested_from="2000-01-01", per_note=0)
    assert len(everything) == 20
    assert search(server, "notes", ingested_to="2000-01-01") == []
    both = search(server, "notes", k=20, all_tags=["Python", "programming"])
    assert {hit["source"] for hit in both} == {"code/pytest-fixtures.md"}


def test_per_note_limits_passages_per_note_and_zero_ranks_passages_alone(
    server: Served,
) -> None:
    query = "pytest fixture scope, teardown after yield and parametrised tests"

    def sources(**arguments) -> list[str]:
        return [hit["source"] for hit in search(server, query, k=6, **arguments)]

    distinct = sources()
    assert distinct[0] == "code/pytest-fixtures.md" and len(set(distinct)) == 6
    plain = sources(per_note=0)
    assert plain.count("code/pytest-fixtures.md") >= 3
    two = sources(per_note=2)
    assert two.count("code/pytest-fixtures.md") == 2
    assert max(two.count(source) for source in two) == 2
    assert sources(per_note=-3) == plain  # clamped to 0
    assert sources(per_note=1000) == plain  # clamped to 20 passages per note: no limit here


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "kimchi", "k": "many"}, "k"),
        ({"query": "kimchi", "tags": "recipes"}, "tags"),
        ({"query": "kimchi", "tags": [["nested"]]}, "tags"),
        ({"query": "kimchi", "mode": "fuzzy"}, "mode"),
        ({"query": "kimchi", "per_note": "two"}, "per_note"),
        ({"query": "kimchi", "all_tags": "python"}, "all_tags"),
        ({"query": "kimchi", "date_from": "March 2024"}, "date_from"),
        ({"query": "kimchi", "date_to": "2024-13-01"}, "date_to"),
        ({"query": "kimchi", "ingested_from": "yesterday"}, "ingested_from"),
        ({"query": "kimchi", "ingested_to": "2024/03/01"}, "ingested_to"),
        ({"query": "kimchi", "date_from": "2024-06-01", "date_to": "2024-01-01"}, "date_from"),
    ],
)
def test_invalid_arguments_get_a_validation_error_naming_the_field(
    server: Served, arguments: dict, named: str
) -> None:
    message = error_text(call_tool(server.url, "search_notes", arguments))
    assert "validation error" in message and named in message
    assert "\n" not in message and "pydantic" not in message and len(message) < 400, message


def test_an_unknown_argument_is_refused_with_the_valid_names(server: Served) -> None:
    refused = call_tool(server.url, "read_note", {"source": "cooking/kimchi.md", "line": 18})
    assert error_text(refused) == (
        "Error executing tool read_note: validation error for read_note: no argument 'line' "
        "(did you mean 'lines' or 'start_line'?); it takes source, start_line, lines"
    )
    typo = error_text(call_tool(server.url, "search_notes", {"query": "kimchi", "tag": ["x"]}))
    assert "no argument 'tag' (did you mean 'tags'" in typo and "it takes query, k," in typo


def test_a_wrong_type_gets_one_line_naming_the_argument(server: Served) -> None:
    wrong = call_tool(server.url, "read_note", {"source": "cooking/kimchi.md", "lines": "ten"})
    assert error_text(wrong) == (
        "Error executing tool read_note: validation error for read_note: argument 'lines': "
        "Input should be a valid integer, unable to parse string as an integer"
    )
    missing = error_text(call_tool(server.url, "related_notes", {"k": 2}))
    assert missing.endswith("argument 'source' is required"), missing


def test_health_reports_embedder_model_dimension_collection_and_points(
    server: Served, ingested_notes: IngestedNotes
) -> None:
    response = httpx.get(f"{server.base}/health")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True
    assert body["embedder"]["ready"] is True
    # a model served from a folder is named by its last part: /health asks for no token
    name = ingested_notes.model.rstrip("/").rsplit("/", 1)[-1]
    assert ingested_notes.model.startswith("/") and "site-packages" not in response.text
    assert body["embedder"]["model"] == name
    assert body["embedder"]["dimensions"] == ingested_notes.dimensions == 384
    assert body["store"] == {
        "collection": COLLECTION,
        "ready": True,
        "points": ingested_notes.chunks,
        "model": name,
    }
    assert body["code"]["exists"] is False  # no code in this corpus: reported, and still ok


def test_queries_and_note_text_never_reach_the_log(
    start_server: ServerFactory, embedder_url: str, store_copy
) -> None:
    server = start_server(EMBED_URL=embedder_url, QDRANT_PATH=str(store_copy()))
    secret = "zanzibar xylophone quokka"
    search(server, secret, k=3)
    call_tool(server.url, "search_notes", {"query": secret, "k": "bad"})
    log = server.log
    assert "search_notes k=3" in log  # the call was logged, as counts
    assert "zanzibar" not in log
    for text in NOTES.values():
        assert text.strip().splitlines()[-1] not in log


def test_embedder_down_is_a_tool_error_and_the_server_keeps_serving(
    start_server: ServerFactory, store_copy
) -> None:
    server = start_server(EMBED_URL="http://127.0.0.1:9", QDRANT_PATH=str(store_copy()))
    message = error_text(call_tool(server.url, "search_notes", {"query": "kimchi"}))
    assert message.count("embedder failed") == 1 and "unreachable" in message
    assert "start the embedder" in message
    # Still alive: what needs no embedder works (keyword search, list_tags), /health says why.
    hits = search(server, "gochugaru", mode="keyword")
    assert [hit["source"] for hit in hits] == ["cooking/kimchi.md"]
    tags = tool_answer(call_tool(server.url, "list_tags"))["tags"]
    assert sorted((t["tag"], t["notes"]) for t in tags) == sorted(TAG_COUNTS)
    health = httpx.get(f"{server.base}/health")
    assert health.status_code == 503
    assert health.json()["embedder"]["ready"] is False
    assert server.proc.poll() is None


def test_embedder_still_loading_says_retry_in_a_minute(
    start_server: ServerFactory, start_embedder, minilm_path: Path, store_copy, tmp_path: Path
) -> None:
    gate = GatedModel(minilm_path, tmp_path / "minilm")  # loads only once the test says so
    embedder = start_embedder({"EMBED_MODEL": str(gate.folder)}, wait=False)
    folder = store_copy()
    with open_store(make_settings(embedder.url, folder)) as store:  # same weights, its name
        store.update_metadata({"embed_model": str(gate.folder)})
    try:
        embedder.wait_listening()
        server = start_server(EMBED_URL=embedder.url, QDRANT_PATH=str(folder))
        message = error_text(call_tool(server.url, "search_notes", {"query": "kimchi"}))
        assert "embedder failed: still loading, retry in a minute" in message
        gate.open()
        embedder.wait_healthy()
        assert results(call_tool(server.url, "search_notes", {"query": "kimchi"}))
    finally:
        embedder.stop()


def test_missing_collection_says_run_ingest_first(
    start_server: ServerFactory, embedder_url: str, store_copy
) -> None:
    server = start_server(
        EMBED_URL=embedder_url, QDRANT_PATH=str(store_copy()), COLLECTION="never_ingested"
    )
    for tool, arguments in [("search_notes", {"query": "kimchi"}), ("list_tags", {})]:
        message = error_text(call_tool(server.url, tool, arguments))
        assert "does not exist" in message and "ingest.py" in message
    health = httpx.get(f"{server.base}/health")
    assert health.status_code == 503
    assert "ingest.py" in health.json()["store"]["error"]


def test_empty_collection_says_run_ingest_first(
    start_server: ServerFactory,
    embedder_url: str,
    ingested_notes: IngestedNotes,
    tmp_path: Path,
) -> None:
    settings = make_settings(embedder_url, tmp_path / "qdrant")
    with open_store(settings) as store:
        collection.create(store, ingested_notes.model, ingested_notes.dimensions)
    server = start_server(EMBED_URL=embedder_url, QDRANT_PATH=settings.QDRANT_PATH)
    message = error_text(call_tool(server.url, "search_notes", {"query": "kimchi"}))
    assert "has no notes yet" in message and "ingest.py" in message
    assert tool_answer(call_tool(server.url, "list_tags")) == {"tags": []}


def test_a_store_folder_held_elsewhere_is_reported_and_recovered_from(
    start_server: ServerFactory, embedder_url: str, store_copy
) -> None:
    folder = store_copy()
    settings = make_settings(embedder_url, folder)
    with open_store(settings):  # e.g. an ingest run holding the embedded folder
        server = start_server(EMBED_URL=embedder_url, QDRANT_PATH=str(folder))
        message = error_text(call_tool(server.url, "search_notes", {"query": "kimchi"}))
        assert "in use by another process" in message
    # The server opens the store on first use, so it recovers without a restart.
    assert search(server, "fermented cabbage")[0]["source"] == "cooking/kimchi.md"


def test_stdio_mode_serves_the_same_tools(
    embedder_url: str, store_copy, tmp_path: Path, ingested_notes: IngestedNotes
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(SERVER_SCRIPT), "--stdio"],
        env=server_env({"EMBED_URL": embedder_url, "QDRANT_PATH": str(store_copy())}),
        cwd=SERVER_SCRIPT.parent.parent,
    )

    async def run() -> tuple[set[str], list[dict]]:
        with (tmp_path / "stdio.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                found = await client.call_tool("search_notes", {"query": "tomato seedlings"})
        return names, tool_answer(found)["results"]

    names, hits = anyio.run(run)
    assert names == {
        "search_notes",
        "browse_notes",
        "answer_question",
        "why_not_found",
        "read_note",
        "related_notes",
        "list_tags",
        "list_deleted",
        "status",
    }
    assert hits[0]["source"] == "garden/tomatoes.md"
