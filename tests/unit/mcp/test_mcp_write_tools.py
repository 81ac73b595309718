"""The MCP tools that change the collection (MCP_WRITE_TOOLS=true) and `list_deleted`, through
`python mcp/server.py`, the real MiniLM embedder, a copy of the ingested embedded Qdrant folder
and the SDK's streamable-HTTP client."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mcp_fixtures import (
    SNAPSHOT,
    ServerFactory,
    ServerProcess,
    call_tool,
    error_text,
    list_tools,
    results,
    tool_answer,
)

from kb.core.state import State

WRITE_SNAPSHOT = SNAPSHOT.with_name("tools_list_write_tools.json")
KIMCHI_QUERY = "how long do I ferment napa cabbage with chili paste?"


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-state")


@pytest.fixture(scope="module")
def writer(
    start_server: ServerFactory, embedder_url: str, store_copy, state_dir: Path
) -> ServerProcess:
    return start_server(
        EMBED_URL=embedder_url,
        QDRANT_PATH=str(store_copy()),
        MCP_WRITE_TOOLS="true",
        STATE_DIR=str(state_dir),
    )


def sources(server: ServerProcess, query: str = KIMCHI_QUERY) -> list[str]:
    found = call_tool(server.url, "search_notes", {"query": query, "k": 5})
    return [hit["source"] for hit in results(found)]


def deleted(server: ServerProcess, **arguments) -> list[dict]:
    return tool_answer(call_tool(server.url, "list_deleted", arguments))["notes"]


def test_write_tools_list_matches_their_snapshot(writer: ServerProcess) -> None:
    tools = list_tools(writer.url)
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        WRITE_SNAPSHOT.write_text(json.dumps(tools, indent=2, sort_keys=True) + "\n")
    assert tools == json.loads(WRITE_SNAPSHOT.read_text()), (
        "the tool surface with MCP_WRITE_TOOLS changed; if that is deliberate, rewrite the "
        "snapshot with UPDATE_SNAPSHOTS=1 pytest tests/unit/mcp/test_mcp_write_tools.py"
    )


def test_write_tools_are_annotated_and_ask_for_an_explicit_request(writer: ServerProcess) -> None:
    tools = {tool["name"]: tool for tool in list_tools(writer.url)}
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
        "delete_note",
        "restore_note",
        "save_note",
        "save_url",
        "sync",
    }
    delete, restore = tools["delete_note"], tools["restore_note"]
    assert delete["annotations"]["readOnlyHint"] is False
    assert delete["annotations"]["destructiveHint"] is True
    assert restore["annotations"]["destructiveHint"] is False
    assert delete["annotations"]["idempotentHint"] and restore["annotations"]["idempotentHint"]
    assert "explicitly asks" in delete["description"] and "confirm" in delete["description"]
    assert delete["inputSchema"]["required"] == ["source"]
    assert delete["inputSchema"]["properties"]["hard"]["default"] is False


def test_delete_note_hides_a_note_until_restore_note_brings_it_back(writer: ServerProcess) -> None:
    assert sources(writer)[0] == "cooking/kimchi.md"
    gone = call_tool(writer.url, "delete_note", {"source": "cooking/kimchi.md"})
    assert tool_answer(gone) == {"source": "cooking/kimchi.md", "outcome": "deleted"}
    again = call_tool(writer.url, "delete_note", {"source": "cooking/kimchi.md"})
    assert tool_answer(again)["outcome"] == "already_deleted"
    assert "cooking/kimchi.md" not in sources(writer)
    [note] = [n for n in deleted(writer, cause="user") if n["source"] == "cooking/kimchi.md"]
    assert note["origin"] == "inbox" and note["deleted_at"]
    assert deleted(writer, cause="file_deleted") == []
    back = call_tool(writer.url, "restore_note", {"source": "cooking/kimchi.md"})
    assert tool_answer(back)["outcome"] == "restored"
    assert sources(writer)[0] == "cooking/kimchi.md"
    assert "cooking/kimchi.md" not in [n["source"] for n in deleted(writer)]


def test_a_hard_delete_needs_confirm_and_then_removes_the_note_for_good(
    writer: ServerProcess,
) -> None:
    note, query = "garden/tomatoes.md", "when do tomato seedlings go outside"
    refused = call_tool(writer.url, "delete_note", {"source": note, "hard": True})
    assert "confirm" in error_text(refused)
    assert sources(writer, query)[0] == note
    done = call_tool(writer.url, "delete_note", {"source": note, "hard": True, "confirm": True})
    assert tool_answer(done)["outcome"] == "deleted_for_good"
    assert note not in sources(writer, query)
    assert note not in [n["source"] for n in deleted(writer)]
    assert "no note garden/tomatoes.md" in error_text(
        call_tool(writer.url, "restore_note", {"source": note})
    )


def test_an_unknown_note_or_a_bad_date_is_a_tool_error_naming_it(writer: ServerProcess) -> None:
    unknown = call_tool(writer.url, "delete_note", {"source": "cooking/nope.md"})
    assert "no note cooking/nope.md" in error_text(unknown)
    bad = call_tool(writer.url, "list_deleted", {"since": "last week"})
    assert "validation error" in error_text(bad) and "since" in error_text(bad)


def test_a_delete_is_refused_while_an_ingest_holds_the_lock(
    writer: ServerProcess, state_dir: Path
) -> None:
    with State(state_dir).lock():  # this process stands in for a running ingest
        busy = call_tool(writer.url, "delete_note", {"source": "code/rust.md"})
    assert "another ingest is running" in error_text(busy)
    assert "code/rust.md" not in [n["source"] for n in deleted(writer)]
