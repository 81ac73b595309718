"""What the project writes for itself is its user's alone, whatever the umask: every file under
QDRANT_PATH (the notes' text) and STATE_DIR (embedding cache, run log, lock, YouTube state,
server.json) is 0600 and every folder 0700, written by real processes started under umask 022
(ingest.py syncing an inbox, a folder and a playlist; then the MCP server). Folders made in the
user's notes folder (ingested/) keep the notes folder's own mode."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ingest_fixtures import make_settings, run_script, script_env, write
from mcp_fixtures import ServerFactory, call_tool
from youtube_fixtures import KEY, RECORDED, Replay

from kb.core.settings import Settings
from kb.core.state import State
from kb.store.points import Store


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """Processes started in this block inherit `mask` (restored after)."""
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def modes(root: Path) -> dict[str, int]:
    """Every entry under `root` (itself included) -> its permission bits."""
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        found[path.relative_to(root).as_posix()] = stat.S_IMODE(path.lstat().st_mode)
    return found


def test_storage_and_state_are_owner_only_even_under_a_loose_umask(
    tmp_path: Path, embedder_url: str, youtube_api: Replay, start_server: ServerFactory
) -> None:
    vault = tmp_path / "vault"
    write(vault / "bread.md", "# Bread\n\nKnead the dough for ten minutes.\n")
    youtube_api.playlists["PLmodes"] = [item["id"] for item in RECORDED[:2]]
    settings = make_settings(tmp_path, embedder_url, NOTE_FOLDERS=f"vault={vault}")
    write(settings.NOTES_DIR / "trips" / "huts.md", "# Huts\n\nBook the hut in spring.\n")
    settings.NOTES_DIR.chmod(0o755)
    env = script_env(
        settings,
        NOTE_FOLDERS=settings.NOTE_FOLDERS,
        YOUTUBE_PLAYLISTS="PLmodes",
        YOUTUBE_API_URL=youtube_api.url,
        YOUTUBE_API_KEY=KEY,
    )
    with umask(0o022):
        done = run_script("ingest.py", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        server = start_server(**{k: v for k, v in env.items() if k in Settings.model_fields})
    assert not call_tool(server.url, "status").is_error
    state, storage = settings.STATE_DIR, Path(settings.QDRANT_PATH)
    assert {"server.json", "runs.jsonl", "embed-cache.sqlite3", "youtube"} <= set(modes(state))
    assert any(name.startswith("edge/notes/shard/") for name in modes(storage))
    for root in (state, storage):
        for name, mode in modes(root).items():
            is_dir = (root / name).is_dir()
            assert mode == 0o700 if is_dir else mode & 0o077 == 0, f"{root}/{name}: {mode:o}"
    ingested = settings.NOTES_DIR / "ingested"
    assert (modes(ingested)["."], modes(ingested)["trips"]) == (0o755, 0o755)


def test_folders_an_older_version_left_open_are_closed_when_next_opened(tmp_path: Path) -> None:
    state, storage = tmp_path / "state", tmp_path / "qdrant"
    for folder in (state, storage):
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)
    with State(state).lock(), Store.open("notes", path=storage):
        pass
    assert [stat.S_IMODE(f.stat().st_mode) for f in (state, storage)] == [0o700, 0o700]
