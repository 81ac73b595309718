"""ingest.py and a running MCP server on the same embedded storage: the server announces itself
in STATE_DIR/server.json and runs an ingest for whoever presents its key (POST /ingest)."""

import os
import stat
from pathlib import Path

import httpx
from helpers import free_port
from ingest_fixtures import make_settings
from mcp_fixtures import serve_in_process

from kb import handoff


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
