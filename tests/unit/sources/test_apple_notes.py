"""Apple Notes exports in a NOTE_FOLDERS folder (docs/guide/apple-notes.md): a folder as the
common exporters write it (an account folder, then the Notes folders; HTML notes with their
title and `<meta>` dates, Markdown with created/modified properties, plain text), indexed with
the in-process embedder and searched through the MCP tools with its folders and dates."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import free_port
from ingest_fixtures import make_settings
from mcp_fixtures import call_tool, results, serve_in_process

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.content.formats.webpage import page_date
from kb.core.settings import Settings

PANCAKES = (
    '<!DOCTYPE html>\n<html lang="en">\n<head>\n  <meta charset="UTF-8">\n'
    "  <title>Sourdough pancakes</title>\n"
    '  <meta name="created" content="2024-02-11T08:30:00Z">\n'
    '  <meta name="modified" content="2024-06-01T19:02:00Z">\n</head>\n<body>\n'
    "<div><h1>Sourdough pancakes</h1></div>\n<div>Whisk the discard with buttermilk and one egg; "
    "rest the batter ten minutes before the griddle.</div>\n<div><br></div>\n"
    "<ul><li>2 cups discard</li><li>1 cup buttermilk</li></ul>\n"
    '<div><img src="attachments/IMG_0412.jpeg"></div>\n</body>\n</html>\n'
)
LISBON = (
    "---\ntitle: Lisbon trip\ncreated: 2023-09-02T10:00:00\nmodified: 2023-09-20T18:45:00\n"
    "folder: Travel\n---\n\n# Lisbon trip\n\nTram 28 early in the morning; pastéis de nata in "
    "Belém; the Alfama viewpoints at sunset.\n"
)
GARDEN = (
    "Garden plan\n\nTomatoes along the south fence, basil between them, beans on the trellis.\n"
)


def write_export(root: Path) -> Path:
    """Notes as an exporter leaves them: an account folder, the Notes folders under it, each
    note's attachments in a folder beside it."""
    icloud = root / "iCloud"
    (icloud / "Recipes" / "attachments").mkdir(parents=True)
    (icloud / "Recipes" / "Sourdough pancakes.html").write_text(PANCAKES, encoding="utf-8")
    (icloud / "Recipes" / "attachments" / "IMG_0412.jpeg").write_bytes(b"\xff\xd8\xff\xe0")
    (icloud / "Travel").mkdir()
    (icloud / "Travel" / "Lisbon trip.md").write_text(LISBON, encoding="utf-8")
    (root / "On My Mac" / "Notes").mkdir(parents=True)
    (root / "On My Mac" / "Notes" / "Garden plan.txt").write_text(GARDEN, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, embedder_transport) -> Settings:
    root = tmp_path_factory.mktemp("apple-notes")
    export = write_export(root / "Apple Notes")
    settings = make_settings(root, IN_PROCESS_EMBED_URL, NOTE_FOLDERS=f"apple={export}",
                             MCP_PORT=free_port())  # fmt: skip
    with open_store(settings) as store, embed_client(settings, transport=embedder_transport) as c:
        summary = run(settings, client=c, store=store)
    assert sorted(summary.added) == [
        "apple/On My Mac/Notes/Garden plan.txt", "apple/iCloud/Recipes/Sourdough pancakes.html",
        "apple/iCloud/Travel/Lisbon trip.md",
    ]  # fmt: skip
    return settings


def test_an_exported_folder_is_searched_by_its_notes_folders_titles_and_dates(
    indexed, embedder_transport
):
    with serve_in_process(indexed, transport=embedder_transport) as server:
        query = {"query": "pancake batter with sourdough discard", "path": "apple/iCloud/Recipes/",
                 "k": 3}  # fmt: skip
        [top, *_] = results(call_tool(server.url, "search_notes", query))
        assert top["title"] == "Sourdough pancakes"
        assert top["document_date"].startswith("2024-02-11")  # its meta created, not modified
        query = {"query": "tram and pastries in Lisbon", "path": "apple/iCloud/", "k": 3}
        [top, *_] = results(call_tool(server.url, "search_notes", query))
        assert (top["title"], top["document_date"][:10]) == ("Lisbon trip", "2023-09-02")
        recent = {"query": "tram and pastries in Lisbon", "date_from": "2024-01-01", "k": 5}
        hits = results(call_tool(server.url, "search_notes", recent))
        assert "Lisbon trip" not in [h["title"] for h in hits]
        query = {"query": "where do the tomatoes go", "path": "apple/On My Mac/", "k": 3}
        [top, *_] = results(call_tool(server.url, "search_notes", query))
        assert top["source"] == "apple/On My Mac/Notes/Garden plan.txt"
        assert "document_date" not in top or top["document_date"] is None


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ('<meta name="modified" content="2024-06-01"><meta name="created" content="2024-02-11">',
         "2024-02-11"),
        ('<meta name="date" content="last week"><meta name="modified" content="2024-06-01">',
         "2024-06-01"),
        ('<meta property="article:published_time" content="2025-01-10T16:00:00+01:00">',
         "2025-01-10T16:00:00+01:00"),
        ('<meta name="description" content="2024-02-11">', None),
    ],
)  # fmt: skip
def test_an_html_notes_date_is_its_first_meta_date_that_reads_as_a_date(head, expected):
    soup = BeautifulSoup(f"<html><head>{head}</head><body>x</body></html>", "html.parser")
    assert page_date(soup) == expected
