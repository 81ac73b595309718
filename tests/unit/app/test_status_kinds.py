"""`status` lists every configured source of every kind (Kind.shown, kb.sources.registry): an
mbox written with `mailbox`, an Evernote `.enex`, a Notion export folder, ingested by the real
run into embedded Qdrant (MiniLM), then asked through the MCP tool with the SDK's client; bookmarks
and a Watch Later playlist configured but not readable here are rows naming why."""

from __future__ import annotations

import json
import mailbox
from email.message import EmailMessage
from pathlib import Path

import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import free_port
from ingest_fixtures import make_settings
from mcp_fixtures import call_tool, serve_in_process, tool_answer

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.app.status import status
from kb.core.settings import Settings

PAGE_ID = "0123456789abcdef0123456789abcdef"
ENEX = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<en-export export-date="20250301T093000Z" application="Evernote" version="10.76.2">\n'
    "<note><title>Kimchi</title><created>20240301T101500Z</created><content><![CDATA["
    '<?xml version="1.0" encoding="UTF-8"?><en-note><div>Salt the napa cabbage overnight, then '
    "rub in gochugaru and garlic.</div></en-note>]]></content></note>\n</en-export>\n"
)


def write_mbox(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    box = mailbox.mbox(path)
    for n, (subject, text) in enumerate(
        [("Sourdough", "Feed the starter with rye flour at eight."),
         ("Kayaks", "Two sea kayaks rented for the weekend.")]
    ):  # fmt: skip
        message = EmailMessage()
        message["Subject"], message["From"], message["To"] = subject, "ana@example.com", "me@x.org"
        message["Message-ID"] = f"<m{n}@example.com>"
        message.set_content(text)
        box.add(message)
    box.flush()
    box.close()
    return path


def write_notion(folder: Path) -> Path:
    (folder / f"Garden {PAGE_ID}").mkdir(parents=True)
    (folder / f"Garden {PAGE_ID}.md").write_text(
        "# Garden\n\nRotate the raised beds each spring.\n", encoding="utf-8"
    )
    (folder / f"Garden {PAGE_ID}" / f"Soil {PAGE_ID[::-1]}.md").write_text(
        "# Soil\n\nCompost and bone meal in every bed.\n", encoding="utf-8"
    )
    return folder


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory, embedder_transport) -> Settings:
    """Mail, Evernote and Notion ingested once; then bookmarks and Watch Later configured too
    (never synced: the file is missing and there are no cookies)."""
    root = tmp_path_factory.mktemp("kinds")
    exports = root / "exports"
    ingested = {
        "MAIL": str(write_mbox(exports / "All mail.mbox")),
        "EVERNOTE": str(exports / "Cooking.enex"),
        "NOTION": f"garden={write_notion(exports / 'notion')}",
    }
    (exports / "Cooking.enex").write_text(ENEX, encoding="utf-8")
    settings = make_settings(root, IN_PROCESS_EMBED_URL, **ingested)
    with open_store(settings) as store, embed_client(settings, transport=embedder_transport) as c:
        summary = run(settings, c, store)
    assert len(summary.added) == 5 and not summary.failed, summary.failed
    return make_settings(
        root, IN_PROCESS_EMBED_URL, **ingested, MCP_PORT=free_port(),
        BOOKMARKS=str(exports / "gone" / "Bookmarks"), YOUTUBE_PLAYLISTS="WL",
    )  # fmt: skip


def test_the_status_tool_lists_a_row_for_every_configured_source_of_every_kind(
    synced: Settings, embedder_transport
) -> None:
    with serve_in_process(synced, transport=embedder_transport) as server:
        answer = call_tool(server.url, "status", {})
    report = tool_answer(answer)
    rows = {row["name"]: row for row in report["sources"]}
    assert list(rows) == ["inbox", "youtube/WL", "web", "mail", "evernote", "notion"]
    assert {name: (row["setting"], row["notes"]) for name, row in rows.items()} == {
        "inbox": ("NOTES_DIR", 0),
        "youtube/WL": ("YOUTUBE_PLAYLISTS", 0),
        "web": ("BOOKMARKS", 0),
        "mail": ("MAIL", 2),
        "evernote": ("EVERNOTE", 1),
        "notion": ("NOTION", 2),
    }
    # what has nothing to say is left out of the answer (docs/design/tool-surface.md)
    assert rows["mail"]["path"].endswith("All mail.mbox") and "problem" not in rows["mail"]
    assert rows["mail"]["last_sync"] and rows["notion"]["last_sync"]
    assert "waiting" not in rows["mail"]  # a mailbox's messages are not walked by status
    assert "BOOKMARKS" in rows["web"]["problem"] and "does not exist" in rows["web"]["problem"]
    assert "YOUTUBE_COOKIES_FILE" in rows["youtube/WL"]["problem"]
    assert report["notes"] == 5
    # a row costs the assistant's context little: about 250 characters of compact JSON
    assert len(json.dumps(rows["mail"], separators=(",", ":"))) < 400


def test_a_mailbox_gone_and_a_setting_that_does_not_parse_are_rows_naming_them(
    synced: Settings, tmp_path: Path
) -> None:
    broken = make_settings(
        tmp_path, MAIL=str(tmp_path / "unmounted" / "mbox"), YOUTUBE_PLAYLISTS="not a playlist!"
    )
    rows = {row.name: row for row in status(broken, None).sources}
    assert rows["mail"].problem == f"MAIL: {tmp_path / 'unmounted' / 'mbox'} does not exist " \
        "(a drive unmounted?)"  # fmt: skip
    assert rows["mail"].waiting is None and rows["mail"].notes == 0
    assert rows["youtube"].setting == "YOUTUBE_PLAYLISTS"
    assert "'not a playlist!' is not a playlist id" in (rows["youtube"].problem or "")
