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
from web_fixtures import Mark, chromium_bookmarks

from kb.app.backend import open_store
from kb.app.ingest import sources
from kb.core.errors import ConfigError, StoreUnavailable
from kb.core.settings import Settings
from kb.core.state import State
from kb.sources.registry import fields, source_settings, without_sources


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


def test_ingest_check_reads_none_of_the_users_folders_playlists_or_bookmarks(
    tmp_path: Path, embedder_url: str
):
    # a user with every kind of source: the check indexes its own notes, nothing of theirs
    settings = make_settings(tmp_path, embedder_url)
    vault = tmp_path / "vault"
    write(vault / "mine.md", KIMCHI)
    before = tree_state(vault)
    marks = [Mark("http://127.0.0.1:9/read-later", "A page", ("Read later",))]
    env = script_env(
        settings,
        NOTE_FOLDERS=f"vault={vault}",
        YOUTUBE_PLAYLISTS="PLcheckmustnotread",
        BOOKMARKS=str(chromium_bookmarks(tmp_path / "Bookmarks", marks)),
    )
    result = run_script("ingest_check.py", env=env, cwd=tmp_path, timeout=300)
    assert (result.returncode, result.stdout, result.stderr) == (0, "ingest ok\n", "")
    assert tree_state(vault) == before
    assert not settings.STATE_DIR.exists()  # no playlist or page state of the user's either


def sources_of(settings: Settings) -> list[tuple[str, Path]]:
    """The sources an ingest would read with these settings: (origin, folder read)."""
    return [(s.origin, s.root) for s in sources(settings, State(settings.STATE_DIR))]


def test_every_setting_that_adds_a_source_is_marked_so_the_check_clears_it(tmp_path: Path):
    # ingest_check.py clears the settings marked SOURCE: a new kind of source whose setting
    # is not marked would reach the user's notes again. Every setting a user fills in (empty by
    # default) or switches, set on its own, must add no source unless it is marked; and each
    # marked one does add a source (or is refused for the value, as a source's setting is).
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    somewhere = tmp_path / "somewhere"
    write(somewhere / "note.md", KIMCHI)
    bare = without_sources(make_settings(tmp_path), inbox)
    only_its_inbox = [("inbox", inbox)]
    assert sources_of(bare) == only_its_inbox
    for name, field in fields().items():
        if field.annotation is bool:
            value: object = not field.default
        elif field.default == "" or isinstance(field.default, Path):
            value = str(somewhere) if field.annotation is str else somewhere
        else:
            continue  # numbers and settings with a value by default: limits, not sources
        changed = bare.model_copy(update={name: value})
        if name in source_settings():
            try:
                added = sources_of(changed)
            except ConfigError:
                continue
            assert added != only_its_inbox, f"{name} is marked SOURCE but changes no source"
        else:
            assert sources_of(changed) == only_its_inbox, f"{name} adds a source: mark it SOURCE"
