from pathlib import Path

import pytest
from ingest_fixtures import (
    KIMCHI,
    UNREACHABLE_EMBEDDER,
    make_settings,
    run_script,
    script_env,
    tree_state,
    write,
)
from mcp_fixtures import COLLECTION, ServerFactory, call_tool, results

from kb.app.backend import open_store
from kb.core.errors import StoreUnavailable


def test_ingest_check_passes_in_embedded_mode_and_leaves_the_users_notes_and_collection_alone(
    tmp_path: Path, embedder_url: str
):
    settings = make_settings(tmp_path, embedder_url)
    write(settings.NOTES_DIR / "mine.md", KIMCHI)
    before = tree_state(settings.NOTES_DIR)
    result = run_script("ingest_check.py", env=script_env(settings), cwd=tmp_path, timeout=300)
    assert (result.returncode, result.stdout, result.stderr) == (0, "ingest ok\n", "")
    assert tree_state(settings.NOTES_DIR) == before
    with open_store(settings) as store:
        # its own collection is gone, and the user's collection was never created
        assert store.collection_names() == []


def test_ingest_check_fails_with_one_error_line_when_the_embedder_is_down(tmp_path: Path):
    settings = make_settings(tmp_path, UNREACHABLE_EMBEDDER)
    result = run_script("ingest_check.py", env=script_env(settings), cwd=tmp_path)
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: embedder at {UNREACHABLE_EMBEDDER} unreachable")
    with open_store(settings) as store:
        assert store.collection_names() == []


def test_ingest_check_passes_while_the_mcp_server_holds_the_embedded_store(
    tmp_path: Path, embedder_url: str, start_server: ServerFactory, store_copy
):
    # `make check` without Docker: the server runs on QDRANT_PATH, then ingest_check.py runs
    qdrant = store_copy()
    server = start_server(EMBED_URL=embedder_url, QDRANT_PATH=str(qdrant))
    settings = make_settings(tmp_path, embedder_url, QDRANT_PATH=str(qdrant), COLLECTION=COLLECTION)
    with pytest.raises(StoreUnavailable, match="in use by another process"):
        open_store(settings).close()  # the server holds the folder

    result = run_script("ingest_check.py", env=script_env(settings), cwd=tmp_path, timeout=300)

    assert (result.returncode, result.stdout, result.stderr) == (0, "ingest ok\n", "")
    assert results(call_tool(server.url, "search_notes", {"query": "kimchi"}))  # still serving
    server.stop()
    with open_store(settings) as store:  # the user's store holds only the user's collection
        assert store.collection_names() == [COLLECTION]
