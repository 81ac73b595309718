"""kb.ingest.lifecycle end to end: real MiniLM embedder, embedded Qdrant, a real folder of notes.
Soft delete hides and keeps, restore embeds nothing and survives the next sync, hard delete and
purge remove points, list_deleted filters by cause and date."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import BREAD, KIMCHI, SHOCK, make_settings, run_script, script_env, write

from kb.app.backend import open_store
from kb.app.ingest import run
from kb.core.errors import NoteNotFound
from kb.core.schema import FILE_DELETED, USER_DELETED
from kb.core.settings import Settings
from kb.ingest import lifecycle
from kb.search.query import search
from kb.store.points import Store

KIMCHI_NOTE = "vault/food/kimchi.md"
BREAD_NOTE = "vault/bread.txt"
SHOCK_NOTE = "vault/physics/shock.md"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    write(root / "food" / "kimchi.md", KIMCHI)
    write(root / "bread.txt", BREAD)
    write(root / "physics" / "shock.md", SHOCK)
    return root


@pytest.fixture
def settings(tmp_path: Path, vault: Path) -> Settings:
    return make_settings(tmp_path, IN_PROCESS_EMBED_URL, NOTE_FOLDERS=f"vault={vault}")


def found(store: Store, client) -> list[str]:
    return [h.source or "" for h in search(store, client, "fermenting napa cabbage", k=5)]


def test_a_user_delete_hides_the_note_and_restore_brings_it_back_with_no_embedding(
    settings: Settings, client, store: Store
):
    run(settings, client, store)
    assert lifecycle.soft_delete(store, KIMCHI_NOTE) is True
    assert lifecycle.soft_delete(store, KIMCHI_NOTE) is False  # already deleted: unchanged
    assert KIMCHI_NOTE not in found(store, client)
    [listed] = lifecycle.list_deleted(store)
    assert (listed.source, listed.cause, listed.origin) == (KIMCHI_NOTE, USER_DELETED, "vault")
    calls = client.calls
    assert lifecycle.restore(store, KIMCHI_NOTE) is True
    assert lifecycle.restore(store, KIMCHI_NOTE) is False  # not deleted: nothing to do
    assert client.calls == calls
    assert found(store, client)[0] == KIMCHI_NOTE
    assert lifecycle.list_deleted(store) == []


def test_a_user_deleted_note_whose_file_remains_is_written_again_by_the_next_sync(
    settings: Settings, client, store: Store
):
    run(settings, client, store)
    lifecycle.soft_delete(store, KIMCHI_NOTE)
    # its file is still in the folder: the folder is the truth, as for a file that came back
    assert run(settings, client, store).restored == [KIMCHI_NOTE]
    assert found(store, client)[0] == KIMCHI_NOTE


def test_a_restored_note_whose_file_is_gone_is_not_deleted_again_until_its_file_returns(
    settings: Settings, client, store: Store, vault: Path
):
    run(settings, client, store)
    (vault / "food" / "kimchi.md").unlink()
    assert run(settings, client, store).deleted == [KIMCHI_NOTE]
    assert lifecycle.restore(store, KIMCHI_NOTE) is True
    again = run(settings, client, store)
    assert again.deleted == [] and found(store, client)[0] == KIMCHI_NOTE
    assert all(p.get("restored_at") for _, p in store.payloads(KIMCHI_NOTE))
    # the file comes back unchanged: nothing embedded, the restore mark settled ...
    write(vault / "food" / "kimchi.md", KIMCHI)
    calls = client.calls
    back = run(settings, client, store)
    assert KIMCHI_NOTE in back.unchanged and client.calls == calls
    assert all(p.get("restored_at") is None for _, p in store.payloads(KIMCHI_NOTE))
    # ... so deleting the file again counts again
    (vault / "food" / "kimchi.md").unlink()
    assert run(settings, client, store).deleted == [KIMCHI_NOTE]


def test_hard_delete_removes_live_and_soft_deleted_notes_and_refuses_unknown_ones(
    settings: Settings, client, store: Store
):
    run(settings, client, store)
    lifecycle.soft_delete(store, KIMCHI_NOTE)
    with pytest.raises(NoteNotFound, match=r"vault/nope\.md"):
        lifecycle.hard_delete(store, [BREAD_NOTE, "vault/nope.md"])
    assert store.payloads(BREAD_NOTE)  # nothing removed when one name is unknown
    assert lifecycle.hard_delete(store, [KIMCHI_NOTE, BREAD_NOTE]) == [BREAD_NOTE, KIMCHI_NOTE]
    assert store.payloads(KIMCHI_NOTE) == [] and store.payloads(BREAD_NOTE) == []
    assert lifecycle.list_deleted(store) == []
    with pytest.raises(NoteNotFound):
        lifecycle.restore(store, KIMCHI_NOTE)


def test_list_deleted_filters_by_cause_and_by_date(
    settings: Settings, client, store: Store, vault: Path
):
    run(settings, client, store)
    (vault / "physics" / "shock.md").unlink()
    run(settings, client, store)
    lifecycle.soft_delete(store, KIMCHI_NOTE)
    assert [n.source for n in lifecycle.list_deleted(store)] == [KIMCHI_NOTE, SHOCK_NOTE]
    assert [n.source for n in lifecycle.list_deleted(store, cause=FILE_DELETED)] == [SHOCK_NOTE]
    assert [n.source for n in lifecycle.list_deleted(store, cause=USER_DELETED)] == [KIMCHI_NOTE]
    today = datetime.now(UTC).date()
    assert len(lifecycle.list_deleted(store, since=today.isoformat())) == 2
    assert lifecycle.list_deleted(store, since=(today + timedelta(days=2)).isoformat()) == []
    with pytest.raises(ValueError, match="not an ISO date"):
        lifecycle.list_deleted(store, since="last week")


def test_purge_removes_only_notes_deleted_longer_ago_than_the_limit_and_zero_removes_all(
    settings: Settings, client, store: Store
):
    run(settings, client, store)
    lifecycle.soft_delete(store, KIMCHI_NOTE)
    lifecycle.soft_delete(store, BREAD_NOTE)
    assert lifecycle.purge(store, 90) == []
    later = datetime.now(UTC) + timedelta(days=91)
    assert lifecycle.purge(store, 90, now=later) == [BREAD_NOTE, KIMCHI_NOTE]
    assert store.payloads(KIMCHI_NOTE) == [] and store.payloads(SHOCK_NOTE)
    lifecycle.soft_delete(store, SHOCK_NOTE)
    assert lifecycle.purge(store, 0) == [SHOCK_NOTE]
    assert lifecycle.list_deleted(store) == []


def test_the_ingest_script_lists_deletes_restores_and_purges_notes_by_name(
    settings: Settings, embedder_url, client, tmp_path: Path, vault: Path
):
    with open_store(settings) as opened:  # closed again: the script opens the storage itself
        run(settings, client, opened)
    env = script_env(
        settings, EMBED_URL=embedder_url, NOTE_FOLDERS=f"vault={vault}", PURGE_AFTER_DAYS="0"
    )

    def ingest(*args: str) -> tuple[int, str, str]:
        done = run_script("ingest.py", *args, env=env, cwd=tmp_path)
        return done.returncode, done.stdout, done.stderr

    assert ingest("--delete", KIMCHI_NOTE)[:2] == (
        0,
        f"deleted {KIMCHI_NOTE} (kept, hidden: --restore brings it back)\n",
    )
    code, out, _ = ingest("--list-deleted")
    assert (
        code == 0
        and out.startswith(f"{KIMCHI_NOTE}  ")
        and out.endswith(" user\n1 deleted notes\n")
    )
    assert ingest("--restore", KIMCHI_NOTE)[:2] == (0, f"restored {KIMCHI_NOTE}\n")
    assert ingest("--restore", KIMCHI_NOTE)[:2] == (0, f"{KIMCHI_NOTE} is not deleted\n")
    code, out, err = ingest("--delete", "vault/nope.md")
    assert code == 1 and out == "" and err.startswith("error: no note vault/nope.md")
    assert len(err.splitlines()) == 1
    ingest("--delete", BREAD_NOTE)
    assert ingest("--purge-deleted")[:2] == (0, f"{BREAD_NOTE}\npurged 1 notes soft-deleted\n")
    assert ingest("--delete", SHOCK_NOTE, "--hard")[:2] == (
        0,
        f"deleted for good: {SHOCK_NOTE}\n",
    )
    with open_store(settings) as opened:
        assert {p["source"] for _, p in opened.payloads()} == {KIMCHI_NOTE}
    code, _, err = ingest("--restore", KIMCHI_NOTE, "--rebuild")
    assert code == 2 and "--rebuild" in err
