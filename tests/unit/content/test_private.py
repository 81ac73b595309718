"""Private notes, end to end: real MiniLM embedder, embedded Qdrant, real files. A note with
`private: true` or a PRIVATE_TAGS tag is never embedded or stored; one made private is taken out
of the index on the next sync; its file is never altered or lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import BREAD, KIMCHI, make_settings, tree_state, write

from kb.app.ingest import run
from kb.core.settings import Settings
from kb.ingest.options import IngestOptions
from kb.ingest.progress import format_summary
from kb.store.points import Store

SECRET_WORD = "zanzibarite"  # appears only in private notes
DIARY = f"""---
private: true
---
Today I told nobody about the {SECRET_WORD} in my drawer.
"""
HEALTH = f"""---
tags: [Health, checkups]
---
Blood pressure was fine; the doctor mentioned {SECRET_WORD} once.
"""


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    write(root / "kimchi.md", KIMCHI)
    write(root / "bread.txt", BREAD)
    return root


@pytest.fixture
def settings(tmp_path: Path, vault: Path) -> Settings:
    return make_settings(
        tmp_path,
        IN_PROCESS_EMBED_URL,
        PRIVATE_TAGS=" HEALTH ,journal",
        NOTE_FOLDERS=f"vault={vault}",
    )


def stored_text(store: Store) -> str:
    return " ".join(str(payload) for _, payload in store.payloads())


def test_private_inbox_notes_are_never_stored_and_move_unaltered_into_ingested(
    settings: Settings, client, store: Store
):
    inbox = settings.NOTES_DIR
    write(inbox / "diary.md", DIARY)
    write(inbox / "me" / "health.md", HEALTH)
    write(inbox / "kimchi.md", KIMCHI)
    calls = client.calls
    summary = run(settings, client, store)
    assert sorted(summary.private) == ["diary.md", "me/health.md"]
    assert sorted(summary.added) == ["kimchi.md", "vault/bread.txt", "vault/kimchi.md"]
    assert summary.unindexed == [] and summary.failed == []
    assert SECRET_WORD not in stored_text(store)
    assert {p["source"] for _, p in store.payloads()} == set(summary.added)
    # moved, byte for byte, like every handled note: the inbox holds only what is left to do
    assert (inbox / "ingested" / "diary.md").read_text(encoding="utf-8") == DIARY
    assert (inbox / "ingested" / "me" / "health.md").read_text(encoding="utf-8") == HEALTH
    assert not (inbox / "diary.md").exists() and not (inbox / "me").exists()
    line = format_summary(summary).splitlines()[0]
    assert "2 private (not indexed)" in line and SECRET_WORD not in format_summary(summary)
    log = (settings.STATE_DIR / "runs.jsonl").read_text(encoding="utf-8")
    assert '"private": 2' in log and SECRET_WORD not in log
    assert client.calls > calls  # the other notes were embedded; none of the private text was


def test_a_stored_inbox_note_re_dropped_as_private_is_removed_from_the_index(
    settings: Settings, client, store: Store
):
    inbox = settings.NOTES_DIR
    write(inbox / "diary.md", DIARY.replace("private: true", "tags: diary"))
    run(settings, client, store)
    assert store.payloads("diary.md")
    write(inbox / "diary.md", DIARY)
    summary = run(settings, client, store)
    assert summary.private == ["diary.md"] and summary.unindexed == ["diary.md"]
    assert store.payloads("diary.md") == [] and SECRET_WORD not in stored_text(store)
    assert "1 taken out of the index (private)" in format_summary(summary)
    # the private version replaced the earlier one, so no later --rebuild can index that one
    assert (inbox / "ingested" / "diary.md").read_text(encoding="utf-8") == DIARY
    rebuilt = run(settings, client, store, IngestOptions(rebuild=True))
    assert rebuilt.private == ["diary.md"] and store.payloads("diary.md") == []


def test_a_note_made_private_in_ingested_is_removed_by_a_rebuild(
    settings: Settings, client, store: Store
):
    write(settings.NOTES_DIR / "health.md", HEALTH.replace("Health", "vitals"))
    run(settings, client, store)
    assert store.payloads("health.md")
    moved = settings.NOTES_DIR / "ingested" / "health.md"
    moved.write_text(HEALTH, encoding="utf-8")  # the user tags it `health` where it lies
    assert run(settings, client, store).unindexed == []  # only a rebuild reads ingested/
    before = tree_state(settings.NOTES_DIR)
    summary = run(settings, client, store, IngestOptions(rebuild=True))
    assert summary.unindexed == ["health.md"] and summary.private == ["health.md"]
    assert store.payloads("health.md") == [] and SECRET_WORD not in stored_text(store)
    assert tree_state(settings.NOTES_DIR) == before


def test_a_folder_note_made_private_is_deleted_on_the_next_sync_and_indexed_again_once_public(
    settings: Settings, client, store: Store, vault: Path
):
    run(settings, client, store)
    note = vault / "kimchi.md"
    public = note.read_text(encoding="utf-8")
    note.write_text(public.replace("recipes", "Journal"), encoding="utf-8")
    before = tree_state(vault)
    summary = run(settings, client, store)
    assert summary.private == ["vault/kimchi.md"] and summary.unindexed == ["vault/kimchi.md"]
    assert summary.deleted == [] and summary.unchanged == ["vault/bread.txt"]
    assert store.payloads("vault/kimchi.md") == []  # deleted outright, not soft-deleted
    assert tree_state(vault) == before  # a folder's file is only ever read
    again = run(settings, client, store)
    assert again.private == ["vault/kimchi.md"] and again.unindexed == []
    note.write_text(public, encoding="utf-8")
    back = run(settings, client, store)
    assert back.added == ["vault/kimchi.md"] and store.payloads("vault/kimchi.md")


def test_a_private_field_that_is_not_a_boolean_fails_the_note_and_takes_it_out_of_the_index(
    settings: Settings, client, store: Store, vault: Path
):
    run(settings, client, store)
    note = vault / "bread.txt"
    note.write_text('---\nprivate: "true"\n---\n' + BREAD, encoding="utf-8")
    summary = run(settings, client, store)
    assert [(f.source, f.reason.split(";")[0]) for f in summary.failed] == [
        ("vault/bread.txt", "private must be true or false (a YAML boolean, unquoted), not 'true'")
    ]
    assert summary.unindexed == ["vault/bread.txt"] and summary.private == []
    assert store.payloads("vault/bread.txt") == []
    write(settings.NOTES_DIR / "odd.md", "---\nprivate: 1\n---\nA note.\n")
    inbox_run = run(settings, client, store)
    assert [f.source for f in inbox_run.failed] == ["odd.md", "vault/bread.txt"]
    assert (settings.NOTES_DIR / "odd.md").exists()  # a failed note stays in the inbox
