"""save_note, save_url and sync through `python mcp/server.py` with MCP_WRITE_TOOLS=true and the
SDK's streamable-HTTP client: the real MiniLM embedder, a copy of the ingested embedded Qdrant
folder, an inbox of its own and the recorded web site on 127.0.0.1 (WEB_ALLOW_PRIVATE=true)."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_fixtures import (
    ServerFactory,
    ServerProcess,
    call_tool,
    error_text,
    list_tools,
    results,
    tool_answer,
)
from web_fixtures import EXPECTED, Mark, Site, chromium_bookmarks, serving

from kb.app.backend import Backend
from kb.core.settings import Settings
from kb.core.state import State
from kb.sources.web.page import page_source
from notes_server.tools import all_tools

NEW_TOOLS = {"save_note", "save_url", "sync"}


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serving() as served:
        yield served


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("remember")
    (root / "data").mkdir(mode=0o755)
    (root / "data").chmod(0o755)
    return root


@pytest.fixture(scope="module")
def writer(
    start_server: ServerFactory, embedder_url: str, store_copy, home: Path, site: Site
) -> ServerProcess:
    marks = [Mark(site.page("shakshuka-recipe.html"), "Shakshuka", ("Read later",))]
    bookmarks = chromium_bookmarks(home / "Bookmarks", marks)
    return start_server(
        EMBED_URL=embedder_url,
        QDRANT_PATH=str(store_copy()),
        MCP_WRITE_TOOLS="true",
        STATE_DIR=str(home / "state"),
        NOTES_DIR=str(home / "data"),
        BOOKMARKS=str(bookmarks),
        WEB_ALLOW_PRIVATE="true",
    )


def test_the_three_tools_are_offered_only_with_write_tools_and_annotated_so(
    writer: ServerProcess, tmp_path: Path
) -> None:
    tools = {tool["name"]: tool for tool in list_tools(writer.url)}
    assert set(tools) >= NEW_TOOLS
    for name in NEW_TOOLS:
        assert tools[name]["annotations"]["readOnlyHint"] is False, name
        assert tools[name]["annotations"]["destructiveHint"] is False, name
    assert tools["save_url"]["annotations"]["openWorldHint"] is True
    assert tools["save_note"]["annotations"]["openWorldHint"] is False
    assert tools["save_note"]["inputSchema"]["required"] == ["title", "text"]
    assert tools["save_url"]["inputSchema"]["required"] == ["url"]
    assert "required" not in tools["sync"]["inputSchema"]
    for write_tools in (False, True):
        settings = Settings(_env_file=None, MCP_WRITE_TOOLS=write_tools, STATE_DIR=tmp_path)
        names = {tool.name for tool in all_tools(Backend(settings))}
        assert (names >= NEW_TOOLS) is write_tools and bool(NEW_TOOLS & names) is write_tools


def test_save_note_writes_a_new_note_that_search_finds_in_the_same_conversation(
    writer: ServerProcess, home: Path
) -> None:
    text = "The north route ferry leaves Harbour City at 07:40 and 16:15; bikes ride free."
    saved = call_tool(
        writer.url,
        "save_note",
        {"title": "Ferry timetable", "text": text, "tags": ["Travel"], "folder": "read later"},
    )
    assert tool_answer(saved) == {
        "file": "ingested/read later/ferry-timetable.md",
        "source": "read later/ferry-timetable.md",
        "title": "Ferry timetable",
        "passages": 1,
    }
    path = home / "data" / "ingested" / "read later" / "ferry-timetable.md"
    assert path.read_text() == f"---\ntags:\n- travel\n---\n# Ferry timetable\n\n{text}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # the inbox is 0755: the user's file
    [hit] = results(
        call_tool(writer.url, "search_notes", {"query": "when does the ferry leave", "k": 1})
    )
    assert (hit["source"], hit["tags"]) == ("read later/ferry-timetable.md", ["travel"])

    again = call_tool(
        writer.url,
        "save_note",
        {"title": "Ferry timetable", "text": "Winter: 08:10.", "folder": "read later"},
    )
    assert tool_answer(again)["file"] == "ingested/read later/ferry-timetable-2.md"
    assert path.read_text().endswith(f"{text}\n")  # never written over

    for folder, why in (("../outside", "'..'"), ("ingested", "reserved"), (".hidden", "'.'")):
        refused = call_tool(writer.url, "save_note", {"title": "x", "text": "y", "folder": folder})
        assert why in error_text(refused), folder
    assert not (home / "outside").exists() and not (home / "data" / ".hidden").exists()


def test_save_url_saves_a_page_as_a_note_with_its_title_and_passages(
    writer: ServerProcess, home: Path, site: Site
) -> None:
    url = site.page("bike-lanes-news.html")
    saved = call_tool(
        writer.url,
        "save_url",
        {"url": url, "tags": ["cycling"], "note": "for the residents' meeting"},
    )
    content = tool_answer(saved)
    expected = EXPECTED["bike-lanes-news.html"]
    assert content["title"] == expected["title"] and content["passages"] >= 2
    # where it was fetched: its canonical URL on another host chooses neither folder nor url
    assert content["file"].startswith("ingested/web/127.0.0.1/council-approves")
    text = (home / "data" / content["file"]).read_text()
    assert "kind: web" in text and f"url: {url}" in text and "herald.example" not in text
    assert "> for the residents' meeting" in text and "Refinance your mortgage" not in text
    hits = results(
        call_tool(
            writer.url,
            "search_notes",
            {"query": "protected bike lanes vote", "kind": "web", "k": 3},
        )
    )
    saved_hit = next(h for h in hits if h["source"] == content["source"])
    assert (saved_hit["url"], saved_hit["site"], saved_hit["author"]) == (
        url,
        expected["site"],
        expected["author"],
    )
    assert saved_hit["document_date"] == expected["published"] and saved_hit["fetched_at"]

    missing = call_tool(writer.url, "save_url", {"url": f"{site.url}/missing"})
    assert "not saved: HTTP 404 Not Found" in error_text(missing)
    image = call_tool(writer.url, "save_url", {"url": f"{site.url}/image.png"})
    assert "image/png is not one of WEB_CONTENT_TYPES" in error_text(image)


def test_sync_syncs_every_source_or_one_and_is_refused_while_another_runs(
    writer: ServerProcess, home: Path, site: Site
) -> None:
    (home / "data" / "dropped.md").write_text("# Dropped\n\nA note dropped into the inbox.\n")
    inbox = tool_answer(call_tool(writer.url, "sync", {"source": "inbox"}))
    assert inbox["added"] == 1 and inbox["failed"] == [] and "ingested 1" in inbox["summary"]
    web = tool_answer(call_tool(writer.url, "sync", {"source": "web"}))
    assert web["added"] == 1 and web["failed"] == []
    [hit] = results(
        call_tool(
            writer.url, "search_notes", {"query": "shakshuka eggs", "folder": "read later", "k": 1}
        )
    )
    assert hit["source"] == page_source(site.page("shakshuka-recipe.html"))
    every = tool_answer(call_tool(writer.url, "sync", {}))
    assert every["added"] == 0 and every["unchanged"] >= 1
    unknown = call_tool(writer.url, "sync", {"source": "dropbox"})
    assert "no source 'dropbox' to sync: one of inbox, web" in error_text(unknown)

    with State(home / "state").lock():  # this process stands in for a running ingest
        busy = call_tool(writer.url, "sync", {})
        held = call_tool(writer.url, "save_note", {"title": "Locked", "text": "not now"})
    assert "another ingest is running" in error_text(busy) and "did not start" in error_text(busy)
    assert "nothing was saved" in error_text(held)
    assert not list((home / "data").rglob("locked*.md"))
