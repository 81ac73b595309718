"""Attacks on the web surfaces, kept as repeatable cases (issue 27's live attack found each one
getting through): a page on another loopback port reading the dashboard's cookie, the access
log keeping queries and tokens, DNS rebinding against the embedder, a hostile file name forging
the sync log, and clients holding event streams open on /mcp.

Every case drives the real thing: Chromium (Playwright over Debian's chromium), the MCP server
and the embedder as processes, or the server's app under a real uvicorn where a test must reach
inside it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import EmbedderFactory
from dashboard_fixtures import TOKEN, Dashboard, sign_in
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import EMBEDDER_APP, REPO_ROOT, EmbedderProcess, free_port, serve_in_thread, wait_until
from ingest_fixtures import write
from mcp_fixtures import (
    RPC_HEADERS,
    ServerFactory,
    make_settings,
    search_rpc,
    serve_in_process,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

SECRET_QUERY = "zanzibar-diary-7781"  # a query the log must never hold
LOG_TOKEN = "tok-7c2e9a41d0b35f68"
EMBED_KEY = "embedder-key-5f0e2b7c91"


# --- 1: the dashboard's cookie reaches every port of 127.0.0.1 ------------------------------


@pytest.fixture
def other_port() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """Another web server on 127.0.0.1 (any local program can run one): its base URL and the
    headers of every request it got. Cookies ignore ports, so the browser sends it the
    dashboard's."""
    seen: list[dict[str, str]] = []

    async def page(request: Request) -> HTMLResponse:
        seen.append(dict(request.headers))
        return HTMLResponse("<p>a page on another port</p>")

    with serve_in_thread(Starlette(routes=[Route("/{path:path}", page)])) as base:
        yield base, seen


def test_a_page_on_another_loopback_port_gets_nothing_that_works_on_mcp(
    guarded: Dashboard, page: Any, other_port: tuple[str, list[dict[str, str]]]
) -> None:
    base, seen = other_port
    sign_in(page, guarded)
    page.goto(base + "/")
    cookie = seen[0].get("cookie", "")
    assert cookie, "the browser sent no cookie: the case no longer tests anything"
    assert TOKEN not in str(seen)
    values = [part.partition("=")[2] for part in cookie.split("; ")]
    for credential in [{"Authorization": f"Bearer {v}"} for v in values] + [{"Cookie": cookie}]:
        answer = httpx.post(
            guarded.url("/mcp"), json=search_rpc(), headers={**RPC_HEADERS, **credential}
        )
        assert answer.status_code == 401, credential
    for value in values:  # nor on the hand-off route ingest.py uses
        answer = httpx.post(guarded.url("/ingest"), headers={"Authorization": f"Bearer {value}"})
        assert answer.status_code == 401


# --- 5: the access log ----------------------------------------------------------------------


def test_the_access_log_keeps_paths_but_no_query_and_no_token(
    start_server: ServerFactory, embedder_url: str, store_copy: Any
) -> None:
    server = start_server(  # DEBUG: a line per request (INFO shows none)
        EMBED_URL=embedder_url,
        QDRANT_PATH=str(store_copy()),
        MCP_TOKEN=LOG_TOKEN,
        LOG_LEVEL="DEBUG",
    )
    signed = {"Authorization": f"Bearer {LOG_TOKEN}"}
    with httpx.Client(base_url=server.base, timeout=60) as client:
        searched = client.get("/search", params={"q": SECRET_QUERY, "k": 3}, headers=signed)
        assert searched.status_code == 200
        shown = client.get(
            "/preview",
            params={"source": "cooking/kimchi.md", "chunk": 0, "q": SECRET_QUERY},
            headers=signed,
        )
        assert shown.status_code == 200
        # not signed in: redirected to the login form, the query in its `next`
        assert client.get("/search", params={"q": SECRET_QUERY}).status_code == 303
        assert client.get("/login", params={"next": f"/search?q={SECRET_QUERY}"}).is_success
        refused = client.post(
            "/mcp", params={"token": LOG_TOKEN}, json=search_rpc(SECRET_QUERY), headers=RPC_HEADERS
        )
        assert refused.status_code == 401  # a token in the query string never counts
        tool = client.post("/mcp", json=search_rpc(SECRET_QUERY), headers={**RPC_HEADERS, **signed})
        assert tool.status_code == 200
        assert client.get("/status/panel", headers=signed).status_code == 200  # the last one
    wait_until(lambda: '"GET /status/panel' in server.log, 30, "the access log's last line")
    log = server.log
    assert SECRET_QUERY not in log and LOG_TOKEN not in log, log[-3000:]
    # the lines are still there, the query string replaced
    assert '"GET /search?<redacted> HTTP/1.1" 200' in log, log[-3000:]
    assert '"GET /preview?<redacted> HTTP/1.1" 200' in log
    assert '"POST /mcp?<redacted> HTTP/1.1" 401' in log
    assert "search_notes k=1" in log  # the tool ran, logged by counts


# --- 6: DNS rebinding and other sites against the embedder ----------------------------------


def hostile_hosts(port: int) -> list[str]:
    return [
        "attacker.example",
        f"attacker.example:{port}",
        f"localhost.attacker.example:{port}",
        f"localhost:{port}.attacker.example",
        f"127.0.0.1.nip.io:{port}",
        f"localhost:{port}@attacker.example",
        f"attacker.example@localhost:{port}",
        "localhost",  # no port: no client of ours sends that
        f"0.0.0.0:{port}",
        f"127.0.0.2:{port}",
        f"2130706433:{port}",  # 127.0.0.1 as a decimal number
        f"localhost.:{port}",
        f"localhost:{port},attacker.example",
        f"embedder-lb:{port}",  # the cluster's balancer: only where EMBED_ALLOWED_HOSTS says so
    ]


def hostile_origins(port: int) -> list[str]:
    return [
        "http://attacker.example",
        "https://attacker.example",
        "null",
        f"http://attacker.example:{port}",
        f"http://localhost:{port}.attacker.example",
        f"http://localhost:{port}@attacker.example",
        "http://localhost",  # no port
        f"http://localhost:{port + 1}",
        f"http://127.0.0.1:{port}.nip.io",
        "file://",
    ]


def embedder_attempts(base: str, headers: dict[str, str]) -> list[httpx.Response]:
    """The same headers on every route: health, models, an embedding, a rerank."""
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        return [
            client.get("/health"),
            client.get("/v1/models"),
            client.post("/v1/embeddings", json={"input": "kimchi"}),
            client.post("/v1/rerank", json={"query": "kimchi", "documents": ["a"]}),
        ]


def test_the_embedder_refuses_foreign_hosts_and_origins_on_every_route(
    minilm_embedder: EmbedderProcess, minilm_path: Path
) -> None:
    port = minilm_embedder.port
    cases = [({"Host": host}, 421, "invalid_host") for host in hostile_hosts(port)]
    cases += [
        ({"Host": f"127.0.0.1:{port}", "Origin": origin}, 403, "invalid_origin")
        for origin in hostile_origins(port)
    ]
    embedded = minilm_embedder.log.count("embedded ")
    let_through = []
    for headers, status, code in cases:
        for answer in embedder_attempts(minilm_embedder.url, headers):
            body = answer.json()
            if answer.status_code != status or body["error"]["code"] != code:
                let_through.append((headers, answer.request.url.path, answer.status_code))
            assert str(minilm_path) not in answer.text  # nothing about the model either
    assert let_through == []
    assert minilm_embedder.log.count("embedded ") == embedded  # no text was embedded


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "embedder"])
def test_the_embedder_answers_its_own_names_on_its_port(
    minilm_embedder: EmbedderProcess, host: str
) -> None:
    # `embedder` is its service name inside the compose network (the MCP container's EMBED_URL)
    headers = {"Host": f"{host}:{minilm_embedder.port}"}
    with httpx.Client(base_url=minilm_embedder.url, headers=headers, timeout=30) as client:
        assert client.get("/health").status_code == 200
        origin = {"Origin": f"http://{host}:{minilm_embedder.port}"}
        assert client.post("/v1/embeddings", json={"input": "x"}, headers=origin).is_success


def test_the_embedder_answers_its_names_on_whatever_port_the_user_published(
    minilm_embedder: EmbedderProcess,
) -> None:
    # docker run -p 127.0.0.1:18080:8080: the client's Host names the published port, and the
    # name, not the port, is what a rebinding page controls (the image test met this first)
    for host in ("127.0.0.1:18080", "localhost:18080", "[::1]:8081", "embedder:9000"):
        response = httpx.get(f"{minilm_embedder.url}/health", headers={"Host": host}, timeout=30)
        assert response.status_code == 200, host
    refused = httpx.get(
        f"{minilm_embedder.url}/health", headers={"Host": "notes.example:18080"}, timeout=30
    )
    assert refused.status_code == 421
    message = refused.json()["error"]["message"]
    assert "'notes.example:18080'" in message and "EMBED_ALLOWED_HOSTS" in message


@pytest.fixture(scope="module")
def keyed_embedder(start_embedder: EmbedderFactory, minilm_path: Path) -> EmbedderProcess:
    """MiniLM with a key and the cluster balancer's names added to the allowed hosts."""
    return start_embedder(
        {
            "EMBED_MODEL": str(minilm_path),
            "EMBED_API_KEY": EMBED_KEY,
            "EMBED_ALLOWED_HOSTS": "embedder-lb:8080, 127.0.0.1:8081",
        }
    )


def test_allowed_hosts_extend_the_defaults_and_are_checked_before_the_key(
    keyed_embedder: EmbedderProcess,
) -> None:
    key = {"Authorization": f"Bearer {EMBED_KEY}"}

    def status(host: str, **extra: str) -> int:
        headers = {"Host": host, **key, **extra}
        return httpx.get(f"{keyed_embedder.url}/v1/models", headers=headers).status_code

    assert status("embedder-lb:8080") == 200  # added
    assert status("127.0.0.1:8081") == 200
    assert status(f"localhost:{keyed_embedder.port}") == 200  # the defaults stay
    assert status("attacker.example:8080") == 421  # even with the key
    assert status("embedder-lb:8080", Origin="http://attacker.example") == 403
    # without the key a foreign Host still hears only that it is not allowed
    refused = httpx.get(f"{keyed_embedder.url}/v1/models", headers={"Host": "attacker.example"})
    assert refused.status_code == 421 and "EMBED_ALLOWED_HOSTS" in refused.text


def test_without_the_key_health_says_only_whether_the_embedder_is_up(
    keyed_embedder: EmbedderProcess, minilm_path: Path
) -> None:
    bare = httpx.get(f"{keyed_embedder.url}/health")
    assert bare.status_code == 200 and bare.json() == {"status": "ok"}
    assert str(minilm_path) not in bare.text
    wrong = httpx.get(f"{keyed_embedder.url}/health", headers={"Authorization": "Bearer nope"})
    assert wrong.json() == {"status": "ok"}
    full = httpx.get(
        f"{keyed_embedder.url}/health", headers={"Authorization": f"Bearer {EMBED_KEY}"}
    ).json()
    assert full["model"] == str(minilm_path) and full["dimensions"] == 384


@pytest.mark.parametrize(
    "value", ["*", "*.example:8080", "http://localhost:8080", "user@localhost:8080", "a b:80"]
)
def test_the_embedder_refuses_to_start_with_hosts_that_would_open_the_check(
    value: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, str(EMBEDDER_APP)],
        cwd=REPO_ROOT,
        env=EmbedderProcess.environment({"EMBED_ALLOWED_HOSTS": value}, free_port()),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: embedder settings: EMBED_ALLOWED_HOSTS")


# --- 9: a file name that tries to forge lines in the sync log -------------------------------

# A note's name may hold any character but "/" and NUL: here line breaks of every kind, and
# lines that look like the log's own and like the event stream's fields.
FORGING_NAME = (
    "forged\nstored fake.md (9 chunks)\r\nevent: end\rdata: ok\n\nsync finished"
    "\u2028ingested 99 notes\x1b[2K\u202e.md"
)


@pytest.fixture(scope="module")
def forged_inbox(
    store_copy: Any, embedder_transport, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Dashboard]:
    root = tmp_path_factory.mktemp("dash-forged")
    write(root / "data" / FORGING_NAME, "# A note\n\nIts name is the attack; its text is not.\n")
    settings = make_settings(
        IN_PROCESS_EMBED_URL, store_copy(), NOTES_DIR=root / "data", STATE_DIR=root / "state",
        MCP_PORT=free_port(), MCP_WRITE_TOOLS=True,
    )  # fmt: skip
    with serve_in_process(settings, transport=embedder_transport) as server:
        yield Dashboard(server.base, settings)


def test_a_file_name_cannot_forge_lines_in_the_sync_log(forged_inbox: Dashboard, page: Any) -> None:
    page.goto(forged_inbox.url("/sync"))
    page.click("#sync-button")
    page.wait_for_function(
        "() => { const end = document.getElementById('sync-end'); return !!end && !end.hidden; }",
        timeout=60_000,
    )
    lines = page.locator("#sync-log").inner_text().strip().split("\n")
    escaped = (
        r"forged\nstored fake.md (9 chunks)\r\nevent: end\rdata: ok\n\nsync finished"
        r"\u2028ingested 99 notes\x1b[2K\u202e.md"
    )
    assert f"stored {escaped} (1 chunks)" in lines, lines
    assert not [line for line in lines if re.match(r"(stored fake|event:|data:|sync fin)", line)]
    (summary,) = [line for line in lines if line.startswith("ingested ")]
    assert re.match(r"ingested 1 notes .* failed 0$", summary), summary
    assert page.locator("#sync-end").inner_text() == "sync finished"
    assert (forged_inbox.settings.NOTES_DIR / "ingested" / FORGING_NAME).is_file()
    page.reload()  # the replayed log is the same
    page.locator("#sync-end:not([hidden])").wait_for()
    assert page.locator("#sync-log").inner_text().strip().split("\n") == lines


# --- 10: event streams held open on /mcp ----------------------------------------------------

STREAMS = 40  # each one held would be an open file in the server, for as long as the client likes


def test_event_streams_on_mcp_are_refused_at_once_and_none_is_held(
    start_server: ServerFactory, embedder_url: str, store_copy: Any
) -> None:
    server = start_server(EMBED_URL=embedder_url, QDRANT_PATH=str(store_copy()))
    listen = {  # the 2026-07-28 revision's long-lived stream: a POST of subscriptions/listen
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {
            "notifications": {"toolsListChanged": True},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "attacker", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    modern = {**RPC_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": listen["method"]}
    # a short read timeout: a stream the server holds open fails the test instead of hanging it
    with httpx.Client(base_url=server.base, timeout=httpx.Timeout(10, read=5)) as client:
        held = []
        try:
            for _ in range(STREAMS):
                stream = {"Accept": "text/event-stream"}
                request = client.build_request("GET", "/mcp", headers=stream)
                held.append(client.send(request, stream=True))
                request = client.build_request("POST", "/mcp", json=listen, headers=modern)
                held.append(client.send(request, stream=True))
            gets, listens = held[::2], held[1::2]
            assert {r.status_code for r in gets} == {405}
            assert {r.headers["content-type"] for r in held} == {"application/json"}
            for answer in held:
                answer.read()  # complete answers, not streams: this returns at once
            assert "stateless" in gets[0].json()["error"]["message"]
            assert gets[0].headers["allow"] == "POST"
            assert {r.json()["error"]["code"] for r in listens} == {-32601}  # method not found
        finally:
            for answer in held:
                answer.close()
    # and the server still answers what it is for
    found = httpx.post(server.url, json=search_rpc("kimchi"), headers=RPC_HEADERS, timeout=60)
    assert found.status_code == 200 and "kimchi" in found.text
