"""`uv run mcp/check.py` against real servers: `mcp ok`, or one clear `error:` line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from helpers import REPO_ROOT, free_port
from mcp_fixtures import (
    CHECK_SCRIPT,
    FACTS,
    ServerFactory,
    call_tool,
    make_settings,
    results,
    server_env,
)

from kb.app import ingest
from kb.app.backend import embed_client, open_store
from kb.core.settings import Settings

TOKEN = "check-token-8d41"


def run_check(
    url: str | None, token: str = "", **settings: str
) -> subprocess.CompletedProcess[str]:
    """mcp/check.py against `url` (None: MCP_URL unset, as in a fresh .env)."""
    endpoint = {"MCP_URL": url} if url is not None else {}
    return subprocess.run(
        [sys.executable, str(CHECK_SCRIPT)],
        cwd=REPO_ROOT,
        env=server_env({**endpoint, "MCP_TOKEN": token, **settings}),
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_check_passes_against_a_server_with_tagged_notes(
    start_server: ServerFactory, embedder_url: str, store_copy
) -> None:
    server = start_server(EMBED_URL=embedder_url, QDRANT_PATH=str(store_copy()))
    done = run_check(server.url)
    assert (done.returncode, done.stdout) == (0, "mcp ok\n"), done.stderr
    assert "tags=1" in server.log  # it exercised the tag filter


def test_check_connects_to_the_servers_mcp_port_when_mcp_url_is_unset(
    start_server: ServerFactory, embedder_url: str, store_copy
) -> None:
    # One port setting: MCP_PORT in .env moves the server and the check together.
    server = start_server(EMBED_URL=embedder_url, QDRANT_PATH=str(store_copy()))
    done = run_check(None, MCP_PORT=str(server.port))
    assert (done.returncode, done.stdout) == (0, "mcp ok\n"), done.stderr


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8123/mcp"),
        ("0.0.0.0", "http://127.0.0.1:8123/mcp"),  # bound everywhere: reached on loopback
        ("::", "http://localhost:8123/mcp"),
        ("::1", "http://[::1]:8123/mcp"),
        ("localhost", "http://localhost:8123/mcp"),
    ],
)
def test_the_mcp_url_is_derived_from_mcp_host_and_mcp_port(host: str, url: str) -> None:
    assert Settings(_env_file=None, MCP_HOST=host, MCP_PORT=8123).mcp_url == url


def test_an_mcp_url_that_is_set_wins_over_host_and_port() -> None:
    settings = Settings(_env_file=None, MCP_PORT=8123, MCP_URL="http://notes.lan:9000/mcp")
    assert settings.mcp_url == "http://notes.lan:9000/mcp"


def test_check_passes_when_no_note_has_tags(
    start_server: ServerFactory, embedder_url: str, tmp_path: Path
) -> None:
    settings = make_settings(embedder_url, tmp_path / "qdrant", NOTES_DIR=tmp_path / "data")
    settings.NOTES_DIR.mkdir()
    for i, fact in enumerate(FACTS[:3]):
        (settings.NOTES_DIR / f"fact-{i}.txt").write_text(fact)
    with embed_client(settings) as client, open_store(settings) as store:
        ingest.run(settings, client, store)
    server = start_server(EMBED_URL=embedder_url, QDRANT_PATH=settings.QDRANT_PATH)
    done = run_check(server.url)
    assert (done.returncode, done.stdout) == (0, "mcp ok\n"), done.stderr


def test_check_sends_the_token_and_explains_a_wrong_one(
    start_server: ServerFactory, embedder_url: str, store_copy
) -> None:
    server = start_server(EMBED_URL=embedder_url, QDRANT_PATH=str(store_copy()), MCP_TOKEN=TOKEN)
    done = run_check(server.url, TOKEN)
    assert (done.returncode, done.stdout) == (0, "mcp ok\n"), done.stderr
    for token in ["", "wrong"]:
        line = one_error_line(run_check(server.url, token))
        assert "bearer token" in line and server.url in line


def test_check_names_a_missing_collection(
    start_server: ServerFactory, embedder_url: str, store_copy
) -> None:
    server = start_server(
        EMBED_URL=embedder_url, QDRANT_PATH=str(store_copy()), COLLECTION="nothing_here"
    )
    line = one_error_line(run_check(server.url))
    assert "list_tags failed" in line and "ingest.py" in line


@pytest.mark.parametrize("path", ["/mcp", "/wrong"])
def test_check_says_when_nothing_answers(path: str) -> None:
    line = one_error_line(run_check(f"http://127.0.0.1:{free_port()}{path}"))
    assert "cannot reach the server" in line


def expand(value: str, env: dict[str, str]) -> str:
    """Claude Code's expansion of ${VAR} and ${VAR:-default} in .mcp.json."""

    def one(match: re.Match[str]) -> str:
        return env.get(match[1]) or (match[2] or "")

    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", one, value)


def test_mcp_json_registers_notes_over_http_at_the_default_url() -> None:
    config = json.loads((REPO_ROOT / ".mcp.json").read_text())
    notes = config["mcpServers"]["notes"]
    assert notes["type"] == "http"
    # the URL the check derives from the defaults, under the name README tells users to use
    default = urlsplit(Settings(_env_file=None).mcp_url)
    assert default.hostname == "127.0.0.1"
    assert notes["url"] == default._replace(netloc=f"localhost:{default.port}").geturl()


@pytest.mark.parametrize("token", ["", TOKEN])
def test_mcp_json_headers_work_with_and_without_a_token(
    start_server: ServerFactory, embedder_url: str, store_copy, token: str
) -> None:
    server = start_server(EMBED_URL=embedder_url, QDRANT_PATH=str(store_copy()), MCP_TOKEN=token)
    notes = json.loads((REPO_ROOT / ".mcp.json").read_text())["mcpServers"]["notes"]
    env = {"MCP_TOKEN": token} if token else {}
    # HTTP clients drop the trailing space an empty token leaves ("Bearer ").
    headers = {k: expand(v, env).strip() for k, v in notes["headers"].items()}
    url = notes["url"].replace(":8000/", f":{server.port}/")
    assert results(call_tool(url, "search_notes", {"query": "bread"}, headers=headers))
