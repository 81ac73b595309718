"""read_note (MCP) and query.py --show: an indexed note's numbered lines, by range; only notes
the index knows, never outside their folder (no `..`, no symlink escape), never deleted ones."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from format_files import PDF_PHRASE, three_page_pdf, write_bytes
from helpers import free_port
from ingest_fixtures import make_settings, run_script, script_env
from mcp_fixtures import call_tool, error_text, results, serve_in_process, tool_answer

from kb.app.backend import embed_client, open_store, read_config
from kb.app.ingest import run
from kb.core.errors import NoteNotFound
from kb.ingest import lifecycle
from kb.search.read import MAX_BYTES, read_item

LONG = "".join(f"line {n} of the long note\n" for n in range(1, 501))


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, embedder_transport):
    """An inbox (long.md, island.pdf, a code file) and a NOTE_FOLDERS folder (vault/a.md),
    ingested once; a secret beside the folder that links must not reach."""
    tmp = tmp_path_factory.mktemp("read")
    vault = tmp / "vault"
    write_bytes(vault / "a.md", "# A\n\nfirst\nsecond\n")
    write_bytes(vault / "link.md", "# Link\n\nreplaced by a symlink after ingest\n")
    write_bytes(tmp / "secret.txt", "TOP SECRET\n")
    settings = make_settings(tmp, IN_PROCESS_EMBED_URL, NOTE_FOLDERS=f"vault={vault}",
                             MCP_PORT=free_port())  # fmt: skip
    write_bytes(settings.NOTES_DIR / "long.md", LONG)
    write_bytes(settings.NOTES_DIR / "island.pdf", three_page_pdf())
    write_bytes(settings.NOTES_DIR / "tool.py", "def tool():\n    return 42\n")
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        assert len(run(settings, client, store).ingested) == 5
    (vault / "link.md").unlink()
    (vault / "link.md").symlink_to(tmp / "secret.txt")  # an escape made after indexing
    return settings


def read(settings, source: str, start: int = 1, lines: int = 200):
    with open_store(settings) as store:
        return read_item(read_config(settings), [store, store.beside("code")], source, start, lines)


def test_lines_are_read_by_range_with_their_numbers(indexed):
    passage = read(indexed, "long.md", 101, 3)
    assert passage.text == (
        "101\tline 101 of the long note\n102\tline 102 of the long note\n"
        "103\tline 103 of the long note"
    )
    assert (passage.end_line, passage.total_lines, passage.truncated) == (103, 500, False)
    assert read(indexed, "long.md", 499, 200).end_line == 500
    assert read(indexed, "long.md", 900).text == ""  # past the end: nothing, not an error
    assert read(indexed, "vault/a.md").text == "1\t# A\n2\t\n3\tfirst\n4\tsecond"
    assert read(indexed, "tool.py").text.startswith("1\tdef tool():")  # from the code collection


def test_a_pdf_is_read_page_by_page(indexed):
    text = read(indexed, "island.pdf").text
    assert "1\t[p. 1]" in text and PDF_PHRASE in text.split("[p. 2]")[1].split("[p. 3]")[0]


def test_only_notes_the_index_knows_are_read(indexed):
    for name in ("../secret.txt", "/etc/passwd", "vault/../../secret.txt", "nothing.md"):
        with pytest.raises(NoteNotFound, match="no indexed note is named"):
            read(indexed, name)


def test_a_symlink_leading_out_of_its_folder_is_not_followed(indexed):
    with pytest.raises(NoteNotFound, match=r"link\.md: not read: symlink pointing outside"):
        read(indexed, "vault/link.md")


def test_a_soft_deleted_note_is_not_readable_until_restored(indexed):
    with open_store(indexed) as store:
        lifecycle.soft_delete(store, "vault/a.md")
    try:
        with pytest.raises(NoteNotFound, match=r"vault/a\.md is deleted"):
            read(indexed, "vault/a.md")
    finally:
        with open_store(indexed) as store:
            lifecycle.restore(store, "vault/a.md")
    assert read(indexed, "vault/a.md").end_line == 4


def test_one_call_stops_at_its_byte_limit_on_a_line_boundary(indexed):
    assert MAX_BYTES == 500_000
    with open_store(indexed) as store:
        passage = read_item(read_config(indexed), [store], "long.md", 1, 2000, max_bytes=1000)
    assert passage.truncated and len(passage.text.encode()) <= 1000
    assert passage.text.endswith(f"{passage.end_line}\tline {passage.end_line} of the long note")
    assert 30 < passage.end_line < 50 and passage.total_lines == 500


def test_the_mcp_tool_and_query_show_read_the_same_lines(indexed, embedder_url, embedder_transport):
    with serve_in_process(indexed, transport=embedder_transport) as app:
        result = call_tool(app.url, "read_note", {"source": "long.md", "start_line": 7, "lines": 2})
        assert not result.is_error
        assert tool_answer(result)["text"] == (
            "7\tline 7 of the long note\n8\tline 8 of the long note"
        )
        refused = call_tool(app.url, "read_note", {"source": "../secret.txt"})
        assert "no indexed note is named" in error_text(refused)
        # search_notes narrows to a domain; a code result says so, prose is the default
        found = call_tool(app.url, "search_notes", {"query": "def tool", "domain": "code"})
        assert [(h["source"], h["domain"], h["locator"]) for h in results(found)] == [
            ("tool.py", "code", "L 1-2")
        ]
        prose = results(
            call_tool(app.url, "search_notes", {"query": "def tool", "domain": "prose"})
        )
        assert prose and all("domain" not in h for h in prose)  # the default: left out
        # /health reports the code collection beside the notes (one function: one point)
        health = httpx.get(f"{app.base}/health").json()
        assert health["ok"] and health["code"]["collection"] == indexed.CODE_COLLECTION
        assert health["code"]["exists"] and health["code"]["points"] == 1
    env = script_env(indexed, EMBED_URL=embedder_url, NOTE_FOLDERS=indexed.NOTE_FOLDERS)
    shown = run_script("query.py", "--show", "long.md:7", env=env, cwd=Path(os.sep))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("7\tline 7 of the long note\n8\tline 8")
    assert "more: --show long.md:207" in shown.stderr
    gone = run_script("query.py", "--show", "vault/link.md", env=env, cwd=Path(os.sep))
    assert gone.returncode != 0 and "not read" in gone.stderr and "SECRET" not in gone.stdout
