"""Folders indexed in place (NOTE_FOLDERS), end to end: real MiniLM embedder, embedded Qdrant,
real files. A folder's files are never changed; a file gone from it is soft-deleted (hidden,
kept) and comes back with no embedding; the mass-deletion guard stops first."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import (
    BREAD,
    KIMCHI,
    SHOCK,
    make_settings,
    run_script,
    script_env,
    tree_state,
    write,
)
from mcp_fixtures import ServerFactory, call_tool, tool_answer

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.app.status import status
from kb.core.errors import IngestError
from kb.core.schema import FILE_DELETED
from kb.core.settings import Settings
from kb.ingest import lifecycle
from kb.ingest.options import IngestOptions
from kb.ingest.progress import format_summary
from kb.search.filters import Filters
from kb.search.query import search, tag_usage
from kb.store.points import Store

KIMCHI_QUERY = "how do I ferment napa cabbage with gochugaru"
BAD_YAML = "---\ntags: [food, kimchi\ntopic: an unclosed list\n---\n# Kimchi\n\nBroken now.\n"
PYTHON_TAG = (
    "---\ntitle: Evil\nrun: !!python/object/apply:os.system ['touch owned']\n---\n# Evil\n\n"
    "A tag that must never be constructed.\n"
)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "Obsidian" / "Main"
    write(root / "food" / "kimchi.md", KIMCHI)
    write(root / "bread.txt", BREAD)
    write(root / "physics" / "shock.md", SHOCK)
    return root


@pytest.fixture
def settings(tmp_path: Path, vault: Path) -> Settings:
    return make_settings(tmp_path, IN_PROCESS_EMBED_URL, NOTE_FOLDERS=f"vault={vault}")


def found(store: Store, client, query: str = KIMCHI_QUERY) -> list[str]:
    return [hit.source or "" for hit in search(store, client, query, k=5)]


def test_a_folder_note_is_searchable_by_folder_name_and_path_and_its_file_is_untouched(
    settings: Settings, client, store: Store, vault: Path
):
    before = tree_state(vault)
    kimchi = vault / "food" / "kimchi.md"
    mtime = kimchi.stat().st_mtime_ns
    summary = run(settings, client, store)
    assert sorted(summary.added) == [
        "vault/bread.txt",
        "vault/food/kimchi.md",
        "vault/physics/shock.md",
    ]
    assert found(store, client)[0] == "vault/food/kimchi.md"
    assert tree_state(vault) == before and kimchi.stat().st_mtime_ns == mtime
    assert {p["origin"] for _, p in store.payloads()} == {"vault"}
    in_food = search(store, client, "bread", k=5, filters=Filters(path="vault/food/"))
    assert [hit.source for hit in in_food] == ["vault/food/kimchi.md"]
    calls = client.calls
    again = run(settings, client, store)
    assert len(again.unchanged) == 3 and again.ingested == again.unchanged
    assert client.calls == calls


def test_an_edit_re_embeds_only_the_changed_chunks(
    settings: Settings, client, store: Store, vault: Path
):
    first = "The first section is about sourdough starters and their care. " * 20
    second = "The second section is about proofing baskets and scoring. " * 20
    note = write(
        vault / "long.md", f"# Baking\n\n## Starter\n\n{first}\n\n## Proofing\n\n{second}\n"
    )
    run(settings, client, store)
    chunks = len(store.payloads("vault/long.md"))
    assert chunks >= 2
    note.write_text(note.read_text().replace("scoring.", "scoring with a lame."), encoding="utf-8")
    summary = run(settings, client, store)
    assert summary.replaced == ["vault/long.md"] and len(summary.unchanged) == 3
    assert summary.embedded_cached == chunks - 1  # only the edited chunk was embedded
    assert any("lame" in p["text"] for _, p in store.payloads("vault/long.md"))


def test_a_deleted_file_is_soft_deleted_and_its_return_restores_it_with_no_embedding(
    settings: Settings, client, store: Store, vault: Path
):
    run(settings, client, store)
    kimchi = vault / "food" / "kimchi.md"
    kimchi.unlink()
    summary = run(settings, client, store)
    assert summary.deleted == ["vault/food/kimchi.md"] and len(summary.unchanged) == 2
    assert "1 deleted (files gone; kept, hidden)" in format_summary(summary)
    assert "vault/food/kimchi.md" not in found(store, client)
    assert "korean cuisine" not in {usage.tag for usage in tag_usage(store)}
    kept = store.payloads("vault/food/kimchi.md")
    assert kept and all(p["deleted_cause"] == FILE_DELETED and p["deleted_at"] for _, p in kept)
    # deleted once: the next sync neither deletes it again nor counts it
    assert run(settings, client, store).deleted == []

    write(kimchi, KIMCHI)
    calls = client.calls
    back = run(settings, client, store)
    assert back.restored == ["vault/food/kimchi.md"] and client.calls == calls
    assert found(store, client)[0] == "vault/food/kimchi.md"
    assert "korean cuisine" in {usage.tag for usage in tag_usage(store)}
    assert all(p.get("deleted_at") is None for _, p in store.payloads("vault/food/kimchi.md"))


def test_the_mass_deletion_guard_stops_before_anything_changes_until_deletes_are_allowed(
    settings: Settings, client, store: Store, vault: Path
):
    run(settings, client, store)
    stored = store.payloads()
    (vault / "food" / "kimchi.md").unlink()
    (vault / "bread.txt").unlink()
    waiting = write(settings.NOTES_DIR / "inbox-note.md", SHOCK.replace("normal", "oblique"))
    with pytest.raises(
        IngestError, match=r"NOTE_FOLDERS vault .*2 of its 3 notes.*--allow-deletes"
    ):
        run(settings, client, store)
    assert store.payloads() == stored and waiting.exists()  # nothing stored, nothing moved
    summary = run(settings, client, store, IngestOptions(allow_deletes=True))
    assert sorted(summary.deleted) == ["vault/bread.txt", "vault/food/kimchi.md"]
    assert summary.added == ["inbox-note.md"]


def test_the_inbox_rebuild_never_removes_folder_notes(
    settings: Settings, client, store: Store, vault: Path
):
    write(settings.NOTES_DIR / "inbox-note.md", SHOCK.replace("normal", "oblique"))
    run(settings, client, store)
    folder_points = len([s for _, p in store.payloads() if (s := p["source"]).startswith("vault/")])
    summary = run(settings, client, store, IngestOptions(rebuild=True))
    assert summary.removed == [] and summary.deleted == []
    assert sorted(summary.unchanged) == [
        "inbox-note.md",
        "vault/bread.txt",
        "vault/food/kimchi.md",
        "vault/physics/shock.md",
    ]
    assert (
        len([p for _, p in store.payloads() if p["source"].startswith("vault/")]) == folder_points
    )
    assert os.path.exists(settings.NOTES_DIR / "ingested" / "inbox-note.md")


def test_a_renamed_file_is_written_under_its_new_name_from_the_cache_with_no_embedding(
    settings: Settings, client, store: Store, vault: Path
):
    run(settings, client, store)
    (vault / "food" / "kimchi.md").rename(vault / "kimchi.md")
    calls = client.calls
    summary = run(settings, client, store)
    assert summary.deleted == ["vault/food/kimchi.md"] and summary.added == ["vault/kimchi.md"]
    assert client.calls == calls  # same text: every vector came from the embedding cache
    assert found(store, client)[0] == "vault/kimchi.md"


def test_ingest_v_names_each_skipped_file_with_the_gate_that_skipped_it(
    settings: Settings, embedder_url, client, vault: Path, tmp_path: Path
):
    write(vault / ".obsidian" / "app.md", "settings")
    write(vault / "food" / "kimchi.md.swp", b"swap")
    write(vault / "drafts" / "idea.md", "a draft git ignores")
    write(vault / ".gitignore", "drafts/\n")
    write(vault / "photo.png", b"\x89PNG")
    write(settings.NOTES_DIR / ".draft.md", "hidden in the inbox")
    subprocess.run(["git", "init", "-q", str(vault)], check=True)
    env = script_env(settings, EMBED_URL=embedder_url, NOTE_FOLDERS=settings.NOTE_FOLDERS)

    verbose = run_script("ingest.py", "-v", env=env, cwd=tmp_path)

    assert verbose.returncode == 0, verbose.stderr
    lines = verbose.stdout.splitlines()
    listed = [
        "  skipped .draft.md (hidden)",
        "  skipped vault/.obsidian/ (hidden)",
        "  skipped vault/food/kimchi.md.swp (editor swap or backup file)",
        "  skipped vault/drafts/ (not tracked by git (.gitignore))",
    ]
    assert all(line in lines for line in listed)
    assert "vault/photo.png" in verbose.stdout  # ignored: other file kinds are named too
    with open_store(settings) as store:  # without -v: counts only
        plain = format_summary(run(settings, client, store)).splitlines()
    assert any(line.startswith("  skipped: ") for line in plain)
    assert not any(line in plain for line in listed)


def test_a_note_with_bad_frontmatter_fails_by_name_and_line_while_the_rest_of_its_folder_syncs(
    settings: Settings,
    embedder_url,
    embedder_transport,
    vault: Path,
    tmp_path: Path,
    start_server: ServerFactory,
):
    write(vault / "tools" / "tool.py", "def tool():\n    return 42\n")  # a code sync beside
    write(vault / "journal.md", "# Journal\n\nThe trip to the mountain hut in June.\n")
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        assert len(run(settings, client, store).ingested) == 5
    write(vault / "food" / "kimchi.md", BAD_YAML)  # stored before: that version stays
    write(vault / "evil.md", PYTHON_TAG)  # new: left out
    write(vault / "journal.md", "---\nprivate: true\n---\n# Journal\n\nPrivate now.\n")
    write(vault / "bread.txt", BREAD + "\nBake it longer in winter.\n")
    env = script_env(settings, EMBED_URL=embedder_url, NOTE_FOLDERS=settings.NOTE_FOLDERS)
    done = run_script("ingest.py", env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    kimchi = "vault/food/kimchi.md: frontmatter is not valid YAML (line 3: expected ','"
    evil = "vault/evil.md: frontmatter is not valid YAML (line 3: could not determine a constructor"
    assert f"failed: {kimchi}" in done.stdout and f"failed: {evil}" in done.stdout
    assert "1 taken out of the index (private)" in done.stdout and "1 replaced" in done.stdout
    assert not (tmp_path / "owned").exists()
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        assert found(store, client)[0] == "vault/food/kimchi.md"  # its last good version
        assert store.payloads("vault/evil.md") == [] and store.payloads("vault/journal.md") == []
        assert any("winter" in p["text"] for _, p in store.payloads("vault/bread.txt"))
        assert lifecycle.list_deleted(store) == []  # a failed note is not gone
        folder = status(settings, store).sources[1]
    logged = [
        json.loads(line) for line in (settings.STATE_DIR / "runs.jsonl").read_text().splitlines()
    ]
    failed = [f["source"] + ": " + f["reason"] for r in logged for f in r["failed"]]
    assert any(f.startswith(kimchi) for f in failed) and any(f.startswith(evil) for f in failed)
    assert sorted(f.source for f in folder.failed) == ["vault/evil.md", "vault/food/kimchi.md"]
    server = start_server(
        EMBED_URL=embedder_url,
        QDRANT_PATH=settings.QDRANT_PATH,
        NOTES_DIR=str(settings.NOTES_DIR),
        STATE_DIR=str(settings.STATE_DIR),
        NOTE_FOLDERS=settings.NOTE_FOLDERS,
    )
    report = tool_answer(call_tool(server.url, "status")) or {}
    shown = {f["source"]: f["reason"] for f in report["sources"][1]["failed"]}
    assert "line 3" in shown["vault/food/kimchi.md"] and "line 3" in shown["vault/evil.md"]
    page = httpx.get(server.url.removesuffix("/mcp") + "/", timeout=30).text
    assert "<code>vault/food/kimchi.md</code>: frontmatter is not valid YAML (line 3" in page
    assert "<code>vault/evil.md</code>: frontmatter is not valid YAML (line 3" in page


def test_notes_failing_on_their_frontmatter_are_not_gone_so_the_deletion_guard_stays_quiet(
    settings: Settings, client, store: Store, vault: Path
):
    run(settings, client, store)
    for path in (vault / "food" / "kimchi.md", vault / "bread.txt"):  # 2 of 3, were they gone
        write(path, BAD_YAML)
    summary = run(settings, client, store)
    assert sorted(f.source for f in summary.failed) == ["vault/bread.txt", "vault/food/kimchi.md"]
    assert summary.deleted == [] and lifecycle.list_deleted(store) == []
    assert summary.unchanged == ["vault/physics/shock.md"]
    assert found(store, client)[0] == "vault/food/kimchi.md"
