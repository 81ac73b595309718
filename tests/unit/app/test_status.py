"""kb.app.status and the MCP tool `status()`: real MiniLM embedder, embedded Qdrant, real folders,
the run log and a watcher file in STATE_DIR; the tool through the SDK's streamable-HTTP client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import BREAD, KIMCHI, SHOCK, make_settings, write
from mcp_fixtures import NOTES, IngestedNotes, ServerFactory, call_tool, tool_answer

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.app.status import WATCHER_FILE, status, watcher
from kb.core.settings import Settings
from kb.ingest import lifecycle


@pytest.fixture
def synced(tmp_path: Path, embedder_transport) -> Settings:
    """Two inbox notes and a three-note folder, ingested once."""
    vault = tmp_path / "vault"
    write(vault / "food" / "kimchi.md", KIMCHI)
    write(vault / "bread.txt", BREAD)
    write(vault / "physics" / "shock.md", SHOCK)
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL, NOTE_FOLDERS=f"vault={vault}")
    write(settings.NOTES_DIR / "a.md", "# A\n\nThe first inbox note, about sailing boats.\n")
    write(settings.NOTES_DIR / "b.md", "# B\n\nThe second inbox note, about mountain huts.\n")
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        summary = run(settings, client, store)
    assert len(summary.ingested) == 5 and not summary.failed
    return settings


def later(path: Path) -> None:
    """Mark a file as saved after the last sync (its log keeps whole seconds)."""
    future = time.time() + 5
    os.utime(path, (future, future))


def test_status_counts_each_sources_notes_and_the_files_waiting(synced: Settings) -> None:
    vault = synced.NOTES_DIR.parent / "vault"
    with open_store(synced) as store:
        fresh = status(synced, store)
        assert [(s.name, s.notes, s.waiting, s.gone) for s in fresh.sources] == [
            ("inbox", 2, 0, 0),
            ("vault", 3, 0, 0),
        ]
        assert fresh.exists and fresh.notes == 5 and fresh.points >= 5 and fresh.deleted == 0
        assert fresh.model and fresh.dimensions == 384 and fresh.problem is None
        assert fresh.last_sync is not None and all(s.last_sync for s in fresh.sources)

        write(synced.NOTES_DIR / "c.md", "A note dropped after the sync.\n")
        write(synced.NOTES_DIR / "binary.md", b"\x00\x01 not text")
        later(write(vault / "new.md", "A new vault note.\n"))
        later(write(vault / "bread.txt", BREAD + "\nBake it longer in winter.\n"))
        (vault / "physics" / "shock.md").unlink()
        lifecycle.soft_delete(store, "b.md")
        changed = status(synced, store)
    inbox, folder = changed.sources
    assert (inbox.notes, inbox.waiting) == (1, 2)  # b.md deleted by hand; c.md, binary.md wait
    assert (folder.notes, folder.waiting, folder.gone) == (3, 2, 1)
    assert changed.notes == 4 and changed.deleted == 1


def test_failures_of_each_sources_last_sync_are_reported_with_the_reason(
    synced: Settings, embedder_transport
) -> None:
    write(synced.NOTES_DIR / "binary.md", b"\x00\x01 not text")
    with (
        open_store(synced) as store,
        embed_client(synced, transport=embedder_transport) as client,
    ):
        run(synced, client, store)
        inbox = status(synced, store).sources[0]
    assert [f.source for f in inbox.failed] == ["binary.md"]
    assert inbox.failed[0].reason
    assert inbox.waiting == 1  # a failed inbox file stays in the inbox


def test_a_folder_the_server_cannot_see_and_a_closed_store_are_named(
    tmp_path: Path, embedder_transport
) -> None:
    settings = make_settings(
        tmp_path, IN_PROCESS_EMBED_URL, NOTE_FOLDERS=f"usb={tmp_path / 'unmounted'}"
    )
    report = status(settings, None)
    assert report.problem and not report.exists and report.notes == 0
    usb = report.sources[1]
    assert usb.waiting is None and "unmounted" in (usb.problem or "")
    assert report.sources[0].problem is None  # the inbox is there


def write_watcher(state_dir: Path, pid: int) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    record = {
        "pid": pid,
        "started_at": "2026-12-01T00:00:00+00:00",
        "folders": ["vault"],
        "last_batch_at": "2026-12-01T00:05:00+00:00",
        "last_batch_notes": 3,
    }
    (state_dir / WATCHER_FILE).write_text(json.dumps(record), encoding="utf-8")


def test_the_watcher_runs_only_while_its_file_names_a_live_process(tmp_path: Path) -> None:
    assert not watcher(tmp_path).running  # no file
    write_watcher(tmp_path, os.getpid())
    alive = watcher(tmp_path)
    assert alive.running and alive.folders == ["vault"] and alive.last_batch_notes == 3
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    write_watcher(tmp_path, int(gone.stdout))
    assert not watcher(tmp_path).running  # it died without removing its file
    (tmp_path / WATCHER_FILE).write_text("{not json", encoding="utf-8")
    assert not watcher(tmp_path).running


def test_the_status_tool_reports_the_index_to_an_mcp_client(
    start_server: ServerFactory,
    embedder_url: str,
    store_copy,
    ingested_notes: IngestedNotes,
    tmp_path: Path,
) -> None:
    state, notes = tmp_path / "state", tmp_path / "notes"
    write_watcher(state, os.getpid())
    write(notes / "waiting.md", "Not ingested yet.\n")
    server = start_server(
        EMBED_URL=embedder_url,
        QDRANT_PATH=str(store_copy()),
        STATE_DIR=str(state),
        NOTES_DIR=str(notes),
    )
    result = call_tool(server.url, "status")
    assert not result.is_error, result.content
    report = tool_answer(result)
    assert report["notes"] == len(NOTES) and report["points"] == ingested_notes.chunks
    assert report["model"] == ingested_notes.model and report["deleted"] == 0
    assert report["sources"][0]["name"] == "inbox" and report["sources"][0]["waiting"] == 1
    assert report["watcher"]["running"] is True and report["watcher"]["pid"] == os.getpid()
