from pathlib import Path

from ingest_fixtures import (
    KIMCHI,
    UNREACHABLE_EMBEDDER,
    make_settings,
    run_script,
    script_env,
    tree_state,
    write,
)

from kb.backend import open_store


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
        assert store.client.get_collections().collections == []


def test_ingest_check_fails_with_one_error_line_when_the_embedder_is_down(tmp_path: Path):
    settings = make_settings(tmp_path, UNREACHABLE_EMBEDDER)
    result = run_script("ingest_check.py", env=script_env(settings), cwd=tmp_path)
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: embedder at {UNREACHABLE_EMBEDDER} unreachable")
    with open_store(settings) as store:
        assert store.client.get_collections().collections == []
