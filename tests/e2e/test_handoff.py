"""ingest.py and a running MCP server on the same embedded storage: the server announces itself
in STATE_DIR/server.json and runs an ingest for whoever presents its key (POST /ingest)."""

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import httpx
from helpers import REPO_ROOT, free_port, wait_until
from ingest_fixtures import UNREACHABLE_EMBEDDER, make_settings, run_script, script_env, write
from mcp_fixtures import ServerFactory, ServerProcess, serve_in_process
from web_fixtures import Site
from youtube_fixtures import KEY, Replay

from kb.app import handoff
from kb.core.settings import Settings
from kb.core.state import RUN_LOG_NAME


def test_the_server_file_is_owner_only_names_a_live_server_and_is_withdrawn(tmp_path: Path):
    settings = make_settings(tmp_path, MCP_PORT=free_port())
    mine = handoff.announce(settings)
    path = settings.STATE_DIR / handoff.SERVER_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the key is for this user only
    assert handoff.running(settings) == mine and mine.pid == os.getpid()
    other = make_settings(tmp_path, QDRANT_PATH=str(tmp_path / "elsewhere"))
    assert handoff.running(other) is None  # another storage folder: not that server's
    handoff.withdraw(settings, mine)
    assert not path.exists() and handoff.running(settings) is None


def test_the_ingest_route_runs_an_ingest_only_for_the_servers_key(tmp_path: Path):
    settings = make_settings(tmp_path, MCP_PORT=free_port())
    with serve_in_process(settings, ingest_key="the-key") as server:
        url = f"{server.base}{handoff.INGEST_PATH}"
        assert httpx.post(url, json={}).status_code == 403
        assert httpx.post(url, json={}, headers={handoff.KEY_HEADER: "guess"}).status_code == 403
        # with the key the ingest runs in the server: here it stops at the (unreachable)
        # embedder and says so, as ingest.py would (make local's test runs one that succeeds)
        done = httpx.post(url, json={}, headers={handoff.KEY_HEADER: "the-key"}, timeout=60)
        assert done.status_code == 409
        assert "embedder at http://127.0.0.1:9 unreachable" in done.json()["error"]


def test_the_ingest_route_refuses_an_option_it_does_not_know_rather_than_dropping_it(
    tmp_path: Path,
):
    settings = make_settings(tmp_path, MCP_PORT=free_port())
    with serve_in_process(settings, ingest_key="the-key") as server:
        url = f"{server.base}{handoff.INGEST_PATH}"
        key = {handoff.KEY_HEADER: "the-key"}
        newer = httpx.post(url, json={"rebuild": "code", "dry_run": True}, headers=key)
        assert newer.status_code == 400
        assert newer.json()["error"] == "bad ingest options: unknown ingest options: dry_run"
        typed = httpx.post(url, json={"youtube_only": "yes"}, headers=key)
        assert typed.status_code == 400 and "youtube_only must be true or false" in typed.text
        # a collection this server's index does not have: said, not taken for "every one"
        other = httpx.post(url, json={"rebuild": "elsewhere"}, headers=key, timeout=60)
        assert other.status_code == 409
        assert "rebuild 'elsewhere': not a collection of this index" in other.json()["error"]
        assert not (settings.STATE_DIR / RUN_LOG_NAME).exists()  # nothing ran


def test_a_server_stopped_with_sigterm_withdraws_its_server_file(
    start_server: ServerFactory, tmp_path: Path
) -> None:
    # what a service manager, `docker stop` or local.py's dying parent (PDEATHSIG) sends
    settings = make_settings(tmp_path)
    server = start_server(
        EMBED_URL=UNREACHABLE_EMBEDDER,
        QDRANT_PATH=settings.QDRANT_PATH,
        STATE_DIR=str(settings.STATE_DIR),
        NOTES_DIR=str(settings.NOTES_DIR),
    )
    announced = handoff.running(settings)
    assert announced is not None and announced.pid == server.proc.pid
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=60) == 0, server.log_tail()
    assert not (settings.STATE_DIR / handoff.SERVER_FILE).exists()


def rewrite(settings: Settings, **changes: object) -> None:
    """server.json as another process would have left it."""
    path = settings.STATE_DIR / handoff.SERVER_FILE
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def zombie(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_a_server_file_naming_an_exited_or_another_process_is_not_trusted(tmp_path: Path):
    settings = make_settings(tmp_path, MCP_PORT=free_port())
    mine = handoff.announce(settings)
    assert handoff.running(settings) == mine
    # exited but not yet reaped by its parent: a zombie, which os.kill(pid, 0) still finds
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_until(lambda: zombie(child.pid), 30, "the child to exit")
        rewrite(settings, pid=child.pid)
        assert handoff.running(settings) is None
    finally:
        child.wait()
    # a live pid that another process got after the server's exit (started at another time)
    rewrite(settings, pid=os.getpid(), started=mine.started + 1)
    assert handoff.running(settings) is None


HOLDER = """import sys
from kb.store.points import Store
with Store.open("notes", path=sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_ingest_hands_off_only_to_the_announced_server_and_says_when_it_does_not_answer(
    tmp_path: Path,
):
    # the storage is held by another process (a watcher, say), and server.json is stale
    settings = make_settings(tmp_path, MCP_PORT=free_port())
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, settings.QDRANT_PATH],
                              cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        announced = handoff.announce(settings)
        started = handoff.started_at(holder.pid)
        assert started is not None
        env = script_env(settings)
        # the pid is the holder's now, not the server's that wrote the file: no hand-off
        rewrite(settings, pid=holder.pid, started=started + 1)
        done = run_script("ingest.py", env=env, cwd=tmp_path)
        assert done.returncode != 0
        assert "held by the MCP server" not in done.stderr
        assert "is in use by another process" in done.stderr, done.stderr
        # the announced server itself, but not listening (starting, or stopping): said so
        rewrite(settings, pid=holder.pid, started=started)
        done = run_script("ingest.py", env=env, cwd=tmp_path)
        assert done.returncode != 0
        (line,) = done.stderr.strip().splitlines()[-1:]
        assert line.startswith("error: ") and "not accepting connections" in line, done.stderr
        assert announced.url in line and "run this again once it is up" in line
    finally:
        holder.communicate("", timeout=30)


def holding_server(start_server: ServerFactory, settings: Settings, **extra: str) -> ServerProcess:
    """An MCP server process on `settings`' embedded storage, holding it (its /health opened
    it), so that ingest.py hands its runs over; no watcher of its own."""
    return start_server(
        EMBED_URL=settings.EMBED_URL,
        QDRANT_PATH=settings.QDRANT_PATH,
        STATE_DIR=str(settings.STATE_DIR),
        NOTES_DIR=str(settings.NOTES_DIR),
        COLLECTION=settings.COLLECTION,
        MCP_WATCH="false",
        **extra,
    )


def runs(settings: Settings) -> list[dict[str, object]]:
    """STATE_DIR/runs.jsonl: one line per source and collection synced (the server's runs)."""
    lines = (settings.STATE_DIR / RUN_LOG_NAME).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_ingest_py_rebuild_code_through_the_server_rebuilds_the_code_collection_only(
    start_server: ServerFactory, tmp_path: Path, embedder_url: str
):
    settings = make_settings(tmp_path, embedder_url)
    write(settings.NOTES_DIR / "trips.md", "# Trips\n\nA walk along the cliffs at dusk.\n")
    write(settings.NOTES_DIR / "inv.py", "def restock(item):\n    return item * 3\n")
    server = holding_server(start_server, settings)
    env = script_env(settings)
    try:
        first = run_script("ingest.py", env=env, cwd=tmp_path, timeout=240)
        assert first.returncode == 0, first.stderr
        assert "held by the MCP server" in first.stderr
        assert "ingested 2 notes" in first.stdout, first.stdout
        before = len(runs(settings))

        code = run_script("ingest.py", "--rebuild", "code", env=env, cwd=tmp_path, timeout=240)
        assert code.returncode == 0, code.stderr
        assert "held by the MCP server" in code.stderr
        # the code collection re-read everything it holds; the notes' was only synced
        assert "rebuilt: ingested 1 notes" in code.stdout, code.stdout
        rebuilt = {r["collection"]: r["rebuild"] for r in runs(settings)[before:]}
        assert rebuilt == {"notes": False, "code": True}, rebuilt
    finally:
        server.stop()


def test_ingest_py_youtube_only_through_the_server_syncs_the_playlists_and_leaves_the_inbox(
    start_server: ServerFactory, tmp_path: Path, embedder_url: str, youtube_api: Replay
):
    youtube_api.playlists["PLx"] = ["raftConsens", "privVideo01"]
    settings = make_settings(tmp_path, embedder_url)
    write(settings.NOTES_DIR / "kimchi.md", "# Kimchi\n\nSalt the cabbage.\n")
    youtube = {"YOUTUBE_PLAYLISTS": "PLx", "YOUTUBE_API_KEY": KEY,
               "YOUTUBE_API_URL": youtube_api.url}  # fmt: skip
    server = holding_server(start_server, settings, **youtube)
    try:
        done = run_script("ingest.py", "--youtube-only", env=script_env(settings, **youtube),
                          cwd=tmp_path, timeout=240)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "held by the MCP server" in done.stderr
        assert (
            "ingested 1 notes" in done.stdout
            and "skipped: 1 deleted or private videos" in done.stdout
        ), done.stdout
        assert (settings.NOTES_DIR / "kimchi.md").exists()  # the inbox was not synced
        assert {r["source"] for r in runs(settings)} == {str(settings.STATE_DIR / "youtube")}
    finally:
        server.stop()


def test_ingest_py_save_url_through_the_server_indexes_the_page_and_syncs_the_inbox_alone(
    start_server: ServerFactory, tmp_path: Path, embedder_url: str, web_site: Site
):
    settings = make_settings(tmp_path, embedder_url)
    folder = tmp_path / "vault"
    write(folder / "kept.md", "# Kept\n\nA note of a folder, synced by the next full run.\n")
    extra = {"NOTE_FOLDERS": f"vault={folder}", "WEB_ALLOW_PRIVATE": "true"}
    server = holding_server(start_server, settings, **extra)
    url = web_site.page("bike-lanes-news.html")
    try:
        done = run_script("ingest.py", "--save-url", url, env=script_env(settings, **extra),
                          cwd=tmp_path, timeout=240)  # fmt: skip
        assert done.returncode == 0, done.stderr
        # the folder is the host fetched, never the page's own canonical link (issue 46)
        assert "held by the MCP server" in done.stderr and "saved web/127.0.0.1/" in done.stderr
        assert "indexed by the MCP server" in done.stdout, done.stdout
        [page] = (settings.NOTES_DIR / "ingested" / "web").rglob("*.md")  # stored, moved
        assert page.read_text(encoding="utf-8").startswith("---\n")
        # the hand-off carried `only: inbox`: the folder waits for a full sync
        assert {r["source"] for r in runs(settings)} == {str(settings.NOTES_DIR)}
    finally:
        server.stop()
