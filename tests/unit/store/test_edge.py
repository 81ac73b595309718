"""Embedded storage on Qdrant's engine in-process (kb.store.edge): a folder of qdrant-client's local
mode is carried over once without embedding (by the app, never by opening a store), one shard per
collection, and data survives."""

import logging
from pathlib import Path

import pytest
import qdrant_edge as qe
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import (
    KIMCHI,
    SHOCK,
    make_settings,
    run_script,
    script_env,
    stored_vectors,
    write,
)

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.app.local_stack import Stack
from kb.core.schema import point_id
from kb.ingest.lifecycle import soft_delete
from kb.search.query import search
from kb.store import collection
from kb.store.edge import EDGE_DIR, tuned_store
from kb.store.migrate import local_mode
from kb.store.points import Point, Store

# a shard that indexes from 1 KB of vectors (the engine's default, 10 MB, takes thousands of
# chunks)
INDEX_EVERYTHING = qe.EdgeOptimizersConfig(indexing_threshold=1)


def segments(store: Store) -> tuple[int, int]:
    """(segments, indexed vectors) of the store's collection: what optimizing changes."""
    found = store.describe()
    return found.segments, found.indexed_vectors


def test_a_local_mode_folder_is_carried_over_once_and_ingest_then_embeds_nothing(
    tmp_path: Path, embedder_transport, caplog: pytest.LogCaptureFixture
):
    local = make_settings(tmp_path, IN_PROCESS_EMBED_URL)
    write(local.NOTES_DIR / "kimchi.md", KIMCHI)
    write(local.NOTES_DIR / "shock.md", SHOCK)
    # what an older version wrote: qdrant-client's local mode in QDRANT_PATH
    with (
        Store(local_mode(tmp_path / "qdrant"), "notes") as store,
        embed_client(local, transport=embedder_transport) as client,
    ):
        run(local, client, store)
        assert soft_delete(store, "shock.md")  # a soft delete must survive the move
        before = {pid: p for pid, p in store.payloads()}
        vectors = stored_vectors(store, list(before))
        made_by = collection.info(store)

    # the same folder, opened by the engine, with an embedder that does not answer
    edge = make_settings(tmp_path)
    caplog.set_level(logging.WARNING, logger="kb.store.migrate")
    with open_store(edge) as store:
        assert {pid: p for pid, p in store.payloads()} == before
        moved = stored_vectors(store, list(before))
        assert all(moved[pid] == pytest.approx(vectors[pid], abs=1e-6) for pid in before)
        assert collection.info(store) == made_by
        with embed_client(edge, transport=embedder_transport) as client:
            summary = run(edge, client, store)  # nothing to embed: the embedder is never asked
            assert client.calls == 0
        assert not summary.failed
        # searchable as before: keyword search needs no embedder; the soft delete holds
        assert [h.source for h in search(store, client, "kimchi", 5, mode="keyword")] == [
            "kimchi.md"
        ]
        assert search(store, client, "supersonic shock", 5, mode="keyword") == []
    told = [r for r in caplog.records if "copied collection 'notes'" in r.getMessage()]
    assert len(told) == 1 and "no embedding" in told[0].getMessage()
    assert (tmp_path / "qdrant" / EDGE_DIR / "notes" / "shard").is_dir()

    caplog.clear()
    with open_store(edge) as store:  # told once: the engine holds it now
        assert len(store.payloads()) == len(before)
    assert not [r for r in caplog.records if "copied collection" in r.getMessage()]


def test_each_collection_is_its_own_shard_and_both_open_in_one_process(tmp_path: Path):
    settings = make_settings(tmp_path)
    point = Point(point_id("a.md", 0), [1.0, 0.0, 0.0], {"source": "a.md", "chunk_index": 0})
    with open_store(settings) as notes, open_store(settings, "code") as code:
        collection.create(notes, "m", 3)
        collection.create(code, "m", 3)
        code.replace([point], ["a.md"])
        assert notes.payloads() == [] and len(code.payloads()) == 1
    with open_store(settings, "code") as code:  # persisted across a close
        assert [p["source"] for _, p in code.payloads()] == ["a.md"]
        assert code.query(1, dense=[1.0, 0.0, 0.0])[0].source == "a.md"
    assert sorted(p.name for p in (tmp_path / "qdrant" / EDGE_DIR).iterdir() if p.is_dir()) == [
        "code",
        "notes",
    ]


def test_search_on_the_engine_answers_with_the_ingested_notes(tmp_path: Path, embedder_transport):
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL)
    write(settings.NOTES_DIR / "kimchi.md", KIMCHI)
    write(settings.NOTES_DIR / "shock.md", SHOCK)
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        run(settings, client, store)
        assert store.optimize() in (True, False)  # blocking, but callable any time
        hits = search(store, client, "supersonic pressure jump", 2)
    assert hits[0].source == "shock.md"


def test_ingest_py_builds_the_engines_search_index_once_and_searches_find_the_same(
    tmp_path: Path, embedder_url: str
):
    settings = make_settings(tmp_path, embedder_url)
    write(settings.NOTES_DIR / "kimchi.md", KIMCHI)
    write(settings.NOTES_DIR / "shock.md", SHOCK)
    # written as the MCP server's ingests write: no optimize
    queries = ["supersonic pressure jump", "fermented cabbage", "kimchi"]

    def found(store: Store, client) -> list[list[tuple[str | None, int | None, float]]]:
        return [
            [(h.source, h.chunk_index, round(h.score, 4)) for h in search(store, client, q, 3)]
            for q in queries
        ]

    tuned = tuned_store(settings.QDRANT_PATH, "notes", optimizers=INDEX_EVERYTHING)
    with tuned as store, embed_client(settings) as client:
        collection.create(store, client.model, client.dimensions)
        assert run(settings, client, store).written > 0
        before = found(store, client)
        plain = segments(store)

    done = run_script("ingest.py", env=script_env(settings), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "optimized the search index of notes" in done.stderr  # what the earlier run wrote

    with open_store(settings) as store, embed_client(settings) as client:
        assert segments(store) != plain
        assert found(store, client) == before
    again = run_script("ingest.py", env=script_env(settings), cwd=tmp_path)
    assert again.returncode == 0 and "search index" not in again.stderr  # nothing left to do


def test_make_local_builds_the_index_the_servers_ingests_left_before_the_server_starts(
    tmp_path: Path,
):
    settings = make_settings(tmp_path)
    points = [
        Point(point_id(f"n{i}.md", 0), [1.0, i / 200, 0.5, 0.1], {"source": f"n{i}.md"})
        for i in range(200)
    ]
    with tuned_store(settings.QDRANT_PATH, "notes", optimizers=INDEX_EVERYTHING) as store:
        collection.create(store, "m", 4)
        store.replace(points, [])  # as the MCP server writes: nothing optimizes
        plain = segments(store)
        before = store.query(3, dense=[1.0, 0.5, 0.5, 0.1])
    said: list[str] = []
    Stack(settings, said.append).index()
    assert said == [f"optimized the search index of notes in {said[0].split()[-1]}"]
    with open_store(settings) as store:
        assert segments(store) != plain
        assert store.query(3, dense=[1.0, 0.5, 0.5, 0.1]) == before
    said.clear()
    Stack(settings, said.append).index()  # nothing left to build: silent
    assert said == []


def test_opening_embedded_storage_changes_nothing_until_the_app_carries_a_collection_over(
    tmp_path: Path,
):
    point = Point(point_id("a.md", 0), [1.0, 0.0, 0.0], {"source": "a.md", "chunk_index": 0})
    with Store(local_mode(tmp_path), "notes") as old:
        collection.create(old, "m", 3)
        old.replace([point], ["a.md"])
        made_by = collection.info(old)
    with Store.open("notes", path=tmp_path) as store:
        assert collection.info(store) is None  # opened: nothing copied, nothing changed
        assert store.carry_over() == 1  # the explicit step (kb.app.backend.open_store)
        assert collection.info(store) == made_by
        assert store.carry_over() is None  # once: the engine holds it now
        assert store.query(1, dense=[1.0, 0.0, 0.0])[0].source == "a.md"
    assert (tmp_path / "collection" / "notes" / "storage.sqlite").is_file()  # the old files stay
