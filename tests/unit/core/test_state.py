"""STATE_DIR: the lock, the embedding cache and the run log live there, never in the notes;
caches an older version left in the notes folder are carried over, never lost."""

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest
from helpers import wait_until
from ingest_fixtures import BREAD, KIMCHI, tree_state, write

from kb.app.ingest import run
from kb.core.errors import IngestBusy
from kb.core.settings import REPO_ROOT, Settings
from kb.core.state import CACHE_NAME, LOCK_NAME, OLD_CACHE_NAME, OLD_LOCK_NAME, RUN_LOG_NAME, State
from kb.embedding.cache import EmbedCache, content_key
from kb.ingest.progress import RecordedProgress, Summary


class _Fixed:
    """A DocumentEmbedder returning fixed vectors (fills a cache without a server)."""

    model, dimensions = "m", 2

    def embed_documents(self, texts):
        return [[float(len(t)), 1.0] for t in texts]


def cached_keys(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {key for (key,) in db.execute("SELECT key FROM vectors")}


def fill(path: Path, texts: list[str]) -> None:
    with EmbedCache(path) as cache:
        cache.embed_documents(_Fixed(), texts)


def test_an_ingest_keeps_its_lock_cache_and_run_log_in_state_dir_and_nothing_in_the_notes(
    settings, client, store
):
    write(settings.NOTES_DIR / "kimchi.md", KIMCHI)
    run(settings, client, store)
    assert sorted(tree_state(settings.NOTES_DIR)) == ["ingested", "ingested/kimchi.md"]
    assert {p.name for p in settings.STATE_DIR.iterdir()} == {
        LOCK_NAME,
        CACHE_NAME,
        RUN_LOG_NAME,
    }
    [line] = (settings.STATE_DIR / RUN_LOG_NAME).read_text(encoding="utf-8").splitlines()
    logged = json.loads(line)
    assert (logged["added"], logged["chunks"], logged["failed"]) == (1, 1, [])
    assert "cabbage" not in line  # counts and paths, never note text


def test_a_cache_left_in_the_notes_folder_by_an_older_version_is_moved_to_state_dir(
    settings, client, store
):
    old = settings.NOTES_DIR / OLD_CACHE_NAME
    fill(old, ["an old text"])
    write(settings.NOTES_DIR / "bread.txt", BREAD)
    run(settings, client, store)
    assert not old.exists()
    assert content_key("m", 2, "an old text") in cached_keys(settings.STATE_DIR / CACHE_NAME)


def test_an_old_cache_is_merged_into_an_existing_one_keeping_every_vector(tmp_path: Path):
    state = State(tmp_path / "state")
    notes = tmp_path / "notes"
    notes.mkdir()
    fill(notes / OLD_CACHE_NAME, ["only in the old cache", "in both"])
    fill(state.embed_cache_path(), ["only in the new cache", "in both"])
    merged = state.embed_cache_path(notes)
    assert cached_keys(merged) == {
        content_key("m", 2, t)
        for t in ("only in the old cache", "in both", "only in the new cache")
    }
    assert not (notes / OLD_CACHE_NAME).exists()


def test_an_old_lock_file_is_removed_unless_an_older_ingest_holds_it(tmp_path: Path):
    notes = tmp_path / "notes"
    write(notes / OLD_LOCK_NAME, "1234\n")
    State(tmp_path / "state").embed_cache_path(notes)
    assert not (notes / OLD_LOCK_NAME).exists()


@pytest.mark.parametrize("name", ["QDRANT_PATH", "NOTES_DIR", "STATE_DIR"])
def test_relative_paths_resolve_against_the_repository_root_not_the_current_folder(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    settings = Settings(_env_file=None, **{name: "some/folder"})
    assert Path(getattr(settings, name)) == REPO_ROOT / "some" / "folder"


def test_the_lock_is_re_entrant_in_its_thread_and_refused_to_another_thread(tmp_path: Path):
    # the MCP server's watcher thread and a write tool share one process: never both at once
    state = State(tmp_path / "state")
    refused: list[BaseException] = []

    def other_thread() -> None:
        try:
            with state.lock():
                pass
        except IngestBusy as exc:
            refused.append(exc)

    with state.lock(), state.lock():  # the same thread again: re-entrant
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join(10)
    assert len(refused) == 1 and f"pid {os.getpid()}" in str(refused[0])
    other_thread()  # released: the other thread's turn now
    assert len(refused) == 1


def test_a_run_that_joins_the_lock_says_the_holders_progress_then_takes_it(tmp_path: Path):
    # `ingest.py` right after `make local`: the server's watcher holds the lock, mid-sync
    state = State(tmp_path / "state")
    said: list[str] = []
    joined = threading.Event()

    def joining() -> None:
        with state.lock(joining=said.append):
            joined.set()

    with state.lock():
        progress = RecordedProgress(state.progress_path, None)
        progress.start(notes=3, chunks=30)
        worker = threading.Thread(target=joining)
        worker.start()
        wait_until(lambda: bool(said), 10, "the joining run to say so")
        assert not joined.is_set()  # it waits, where it used to refuse
        progress.finish(Summary())
        assert not state.progress_path.exists()  # the run is over: no stale line
    worker.join(10)
    assert joined.is_set()
    assert (
        said[0] == f"joining the ingest running in pid {os.getpid()}: ingesting 3 notes (30 chunks)"
    )
    assert said[-1] == "that ingest is done; now this one"
