"""Note paths written without their folder's name (kb.search.paths): the notes of a NOTE_FOLDERS
folder are named `<its name>/...`; a path inside the folder works where one folder holds it, and
one that nothing holds says how the folders' notes are named — for the `path` filter,
read_note, related_notes and why_not_found (MCP tools, real SDK client) and query.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import free_port
from ingest_fixtures import make_settings, run_script, script_env, write
from mcp_fixtures import call_tool, error_text, results, serve_in_process, tool_answer

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.core.settings import Settings
from kb.search import paths

KIMCHI = "# Kimchi\n\nSalt the cabbage for two hours, then rub in the chilli paste.\n"
ALPHA = "# Alpha\n\nThe alpha project ferments cabbage: see [[kimchi]].\n"
DAILY = "# Today\n\nBought cabbage and chilli for the kimchi.\n"
INTRO = "# Intro\n\nThe handbook's daily routine: read, write, ferment.\n"
NOWHERE = "'vault/...'"


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory, embedder_transport) -> Settings:
    """The folder 'Obsidian Sync' indexed as `vault` (Projects/, daily/) and `handbook` (daily/
    too), beside an inbox note."""
    tmp = tmp_path_factory.mktemp("paths")
    sync, handbook = tmp / "Obsidian Sync", tmp / "handbook"
    write(sync / "Projects" / "kimchi.md", KIMCHI)
    write(sync / "Projects" / "alpha.md", ALPHA)
    write(sync / "daily" / "today.md", DAILY)
    write(handbook / "daily" / "intro.md", INTRO)
    settings = make_settings(tmp, IN_PROCESS_EMBED_URL, MCP_PORT=free_port(),
                             NOTE_FOLDERS=f"vault={sync},handbook={handbook}")  # fmt: skip
    write(settings.NOTES_DIR / "bread.md", "# Bread\n\nKnead, rise, bake.\n")
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        assert len(run(settings, client, store).ingested) == 5
    return settings


def test_the_mcp_tools_take_a_folders_path_without_its_name(
    folders: Settings, embedder_transport
) -> None:
    with serve_in_process(folders, transport=embedder_transport) as server:
        found = results(call_tool(server.url, "search_notes",
                                  {"query": "cabbage", "k": 5, "path": "Projects/"}))  # fmt: skip
        note = call_tool(server.url, "read_note", {"source": "Projects/kimchi.md"})
        links = call_tool(server.url, "related_notes", {"source": "Projects/alpha.md"})
        why = call_tool(server.url, "why_not_found", {"source": "Projects/kimchi.md"})
        listed = call_tool(server.url, "browse_notes", {"path": "Projects"})
    assert sorted(r["source"] for r in found) == ["vault/Projects/alpha.md",
                                                  "vault/Projects/kimchi.md"]  # fmt: skip
    read = tool_answer(note)
    assert read["source"] == "vault/Projects/kimchi.md"
    assert "Salt the cabbage" in read["text"]
    related = [n["source"] for n in tool_answer(links)["notes"]]
    assert "vault/Projects/kimchi.md" in related
    story = tool_answer(why)
    assert story["source"] == "vault/Projects/kimchi.md"
    assert story["state"] == "indexed"
    assert tool_answer(listed)["total"] == 2


def test_a_path_nothing_holds_names_the_folders_prefixes_and_two_folders_are_named(
    folders: Settings, embedder_transport
) -> None:
    with serve_in_process(folders, transport=embedder_transport) as server:
        missing = call_tool(server.url, "search_notes", {"query": "cabbage",
                                                         "path": "Obsidian Sync/"})  # fmt: skip
        both = call_tool(server.url, "search_notes", {"query": "cabbage", "path": "daily"})
        unread = call_tool(server.url, "read_note", {"source": "Obsidian Sync/Projects/alpha.md"})
    assert results(missing) == [] and results(both) == []
    assert NOWHERE in tool_answer(missing)["note"]
    assert "'Obsidian Sync'" in tool_answer(missing)["note"]
    assert "write handbook/daily or vault/daily" in tool_answer(both)["note"]
    assert unread.is_error and NOWHERE in error_text(unread)


def test_query_path_and_why_resolve_the_same_way_and_an_unknown_path_says_the_prefix(
    folders: Settings, tmp_path: Path, embedder_url: str
) -> None:
    env = script_env(folders, EMBED_URL=embedder_url, NOTE_FOLDERS=folders.NOTE_FOLDERS)
    inside = run_script("query.py", "cabbage", "--path", "Projects/", "--json", env=env,
                        cwd=tmp_path)  # fmt: skip
    outside = run_script("query.py", "cabbage", "--path", "Obsidian Sync/", env=env,
                         cwd=tmp_path)  # fmt: skip
    why = run_script("query.py", "--why", "Projects/kimchi.md", "--json", env=env, cwd=tmp_path)
    assert inside.returncode == 0, inside.stderr
    found = {hit["source"] for hit in json.loads(inside.stdout)["results"]}
    assert found == {"vault/Projects/alpha.md", "vault/Projects/kimchi.md"}
    assert (outside.returncode, outside.stdout) == (0, "no results\n")
    assert NOWHERE in outside.stderr and outside.stderr.startswith("note: ")
    assert why.returncode == 0, why.stderr
    assert json.loads(why.stdout)["source"] == "vault/Projects/kimchi.md"


def test_before_anything_is_ingested_a_path_is_left_for_the_caller_to_report(
    tmp_path: Path,
) -> None:
    with open_store(make_settings(tmp_path)) as store:  # no collection yet
        assert paths.resolve([store], "Projects/") == paths.Resolved("Projects")
