"""Security of the MCP server: Host/Origin validation (DNS rebinding) and the bearer token.

Hostile requests go to the real `python mcp/server.py` process; the token tests run the same app
in this process under uvicorn so they can read the embedder client's call count and prove that
no rejected request ever reached a tool.
"""

from __future__ import annotations

import base64
import logging
import subprocess
import sys

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import REPO_ROOT, free_port
from mcp.shared.exceptions import MCPError
from mcp_fixtures import (
    RPC_HEADERS,
    SERVER_SCRIPT,
    InProcessServer,
    ServerFactory,
    ServerProcess,
    call_tool,
    error_text,
    make_settings,
    results,
    search_rpc,
    serve_in_process,
    server_env,
)
from mcp_types import CallToolResult

TOKEN = "tok-3f9a1c7e5b2d4a60"
TOOL_RAN = "search_notes k="  # the server's INFO line for every search it runs


@pytest.fixture(scope="module")
def server(start_server: ServerFactory, embedder_url: str, store_copy) -> ServerProcess:
    return start_server(EMBED_URL=embedder_url, QDRANT_PATH=str(store_copy()))


def hostile_hosts(port: int) -> list[str]:
    return [
        "evil.com",
        f"evil.com:{port}",
        f"localhost.evil.com:{port}",
        f"localhost:{port}.evil.com",
        f"127.0.0.1.nip.io:{port}",
        f"localhost:{port}@evil.com",
        f"evil.com@localhost:{port}",
        f"localhost:{port + 1}",  # right host, wrong port
        f"127.0.0.1:{port - 1}",
        "localhost:80",
        "localhost",  # no port
        "127.0.0.1",
        f"0.0.0.0:{port}",
        f"127.0.0.2:{port}",
        f"2130706433:{port}",  # 127.0.0.1 as a decimal number
        f"localhost.:{port}",
        f"[::1]:{port}",
        f"LOCALHOST:{port}",
        f"localhost:0{port}",
        f"localhost:{port},evil.com",
    ]


def hostile_origins(port: int) -> list[str]:
    return [
        "http://evil.com",
        "https://evil.com",
        "null",
        f"http://localhost:{port}@evil.com",
        f"http://localhost.evil.com:{port}",
        f"http://localhost:{port}.evil.com",
        f"http://evil.com:{port}",
        f"https://localhost:{port}",  # wrong scheme
        "http://localhost",  # no port
        f"http://localhost:{port + 1}",  # wrong port
        f"http://127.0.0.1:{port}.evil.com",
        "file://",
        "chrome-extension://abcdefghijklmnop",
    ]


def attempts(base: str, headers: dict[str, str]) -> list[httpx.Response]:
    """The same hostile headers on every route: a tool call, the GET stream, /health."""
    with httpx.Client(timeout=10.0) as client:
        return [
            client.post(f"{base}/mcp", json=search_rpc(), headers={**RPC_HEADERS, **headers}),
            client.get(f"{base}/mcp", headers={"Accept": "text/event-stream", **headers}),
            client.get(f"{base}/health", headers=headers),
        ]


def test_hostile_hosts_and_origins_are_all_refused(server: ServerProcess) -> None:
    port = server.port
    variants = [({"Host": host}, 421) for host in hostile_hosts(port)]
    variants += [
        ({"Host": host, "Origin": origin}, 403)
        for origin in hostile_origins(port)
        for host in (f"localhost:{port}", f"127.0.0.1:{port}")
    ]
    assert len(variants) >= 20
    log_before = len(server.log)
    accepted = []
    for headers, status in variants:
        for response in attempts(server.base, headers):
            if response.status_code != status:
                accepted.append((headers, response.request.url.path, response.status_code))
    assert accepted == []
    assert TOOL_RAN not in server.log[log_before:]  # no tool ran for any of them


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
@pytest.mark.parametrize("origin", [None, "http://localhost", "http://127.0.0.1"])
def test_legitimate_loopback_requests_succeed(
    server: ServerProcess, host: str, origin: str | None
) -> None:
    headers = {**RPC_HEADERS, "Host": f"{host}:{server.port}"}
    if origin is not None:
        headers["Origin"] = f"{origin}:{server.port}"
    response = httpx.post(server.url, json=search_rpc("fermented cabbage"), headers=headers)
    assert response.status_code == 200
    result = CallToolResult.model_validate(response.json()["result"])
    assert results(result)[0]["source"] == "cooking/kimchi.md"
    health = httpx.get(f"{server.base}/health", headers={"Host": f"{host}:{server.port}"})
    assert health.status_code == 200


def test_the_sdk_client_works_through_localhost(server: ServerProcess) -> None:
    # What .mcp.json points Claude Code at: http://localhost:PORT/mcp.
    found = results(
        call_tool(f"http://localhost:{server.port}/mcp", "search_notes", {"query": "x"})
    )
    assert len(found) == 5


def test_host_check_stays_on_when_bound_to_all_interfaces(embedder_transport, store_copy) -> None:
    # The container binds 0.0.0.0, where the SDK would not turn the check on by itself.
    port = free_port()
    settings = make_settings(IN_PROCESS_EMBED_URL, store_copy(), MCP_HOST="0.0.0.0", MCP_PORT=port)
    with serve_in_process(settings, transport=embedder_transport) as app:
        for host in hostile_hosts(port):
            assert [r.status_code for r in attempts(app.base, {"Host": host})] == [421] * 3
        assert app.backend.client.calls == 0


def test_allowed_hosts_and_origins_add_to_the_loopback_defaults(
    embedder_transport, store_copy
) -> None:
    port = free_port()
    settings = make_settings(
        IN_PROCESS_EMBED_URL,
        store_copy(),
        MCP_PORT=port,
        MCP_ALLOWED_HOSTS="notes.internal:8443",
        MCP_ALLOWED_ORIGINS="https://notes.internal:8443",
    )
    with serve_in_process(settings, transport=embedder_transport) as app:

        def status(headers: dict[str, str]) -> int:
            return httpx.get(f"{app.base}/health", headers=headers).status_code

        assert status({"Host": "notes.internal:8443"}) == 200
        assert (
            status({"Host": "notes.internal:8443", "Origin": "https://notes.internal:8443"}) == 200
        )
        # the defaults stay: the image's healthcheck asks 127.0.0.1:PORT whatever is set
        assert status({"Host": f"127.0.0.1:{port}"}) == 200
        assert status({"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}) == 200
        assert status({"Host": "notes.internal:9999"}) == 421
        assert status({"Host": f"127.0.0.1:{port}", "Origin": "https://evil.example"}) == 403


def test_a_refused_host_or_origin_is_named_with_the_setting_that_allows_it(server) -> None:
    # e.g. the container's port published on another host port: the answer says what to set
    host = httpx.get(f"{server.base}/health", headers={"Host": "127.0.0.1:18000"})
    assert host.status_code == 421
    assert host.json()["error"]["message"] == (
        "Host header '127.0.0.1:18000' not allowed: add it to MCP_ALLOWED_HOSTS (comma-separated)"
    )
    origin = httpx.get(f"{server.base}/health", headers={"Origin": "http://127.0.0.1:18000"})
    assert origin.status_code == 403
    assert "'http://127.0.0.1:18000'" in origin.json()["error"]["message"]
    assert "MCP_ALLOWED_ORIGINS" in origin.json()["error"]["message"]


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("MCP_ALLOWED_HOSTS", "*"),
        ("MCP_ALLOWED_HOSTS", "*:8000"),
        ("MCP_ALLOWED_HOSTS", "http://localhost:8000"),
        ("MCP_ALLOWED_ORIGINS", "*"),
        ("MCP_ALLOWED_ORIGINS", "localhost:8000"),
        ("MCP_ALLOWED_ORIGINS", "http://localhost:8000/app"),
    ],
)
def test_startup_refuses_settings_that_would_open_the_host_check(
    setting: str, value: str, tmp_path
) -> None:
    env = server_env({"MCP_PORT": str(free_port()), "QDRANT_PATH": str(tmp_path), setting: value})
    done = subprocess.run(
        [sys.executable, str(SERVER_SCRIPT)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {setting}: "), done.stderr
    assert "MCP_DISABLE_HOST_CHECK" in lines[0]


def test_the_host_check_is_off_only_when_a_setting_says_so(
    embedder_transport, store_copy, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    settings = make_settings(
        IN_PROCESS_EMBED_URL, store_copy(), MCP_PORT=port, MCP_DISABLE_HOST_CHECK=True
    )
    with (
        caplog.at_level(logging.WARNING),
        serve_in_process(settings, transport=embedder_transport) as app,
    ):
        response = httpx.get(f"{app.base}/health", headers={"Host": "evil.com"})
    assert response.status_code == 200
    assert "Host/Origin validation is OFF" in caplog.text


# --- bearer token ----------------------------------------------------------------------------


@pytest.fixture
def token_server(embedder_transport, store_copy) -> InProcessServer:
    settings = make_settings(
        IN_PROCESS_EMBED_URL, store_copy(), MCP_PORT=free_port(), MCP_TOKEN=TOKEN
    )
    with serve_in_process(settings, transport=embedder_transport) as app:
        yield app


def bad_credentials() -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """(name, extra headers, query params) of requests that must not pass."""
    basic = base64.b64encode(f"user:{TOKEN}".encode()).decode()
    return [
        ("missing", {}, {}),
        ("wrong", {"Authorization": "Bearer not-the-token"}, {}),
        ("prefix", {"Authorization": f"Bearer {TOKEN[:-1]}"}, {}),
        ("longer", {"Authorization": f"Bearer {TOKEN}x"}, {}),
        ("first char", {"Authorization": f"Bearer {TOKEN[0]}"}, {}),
        ("scheme only", {"Authorization": "Bearer"}, {}),
        ("no scheme", {"Authorization": TOKEN}, {}),
        ("other scheme", {"Authorization": f"Token {TOKEN}"}, {}),
        ("basic", {"Authorization": f"Basic {basic}"}, {}),
        ("two spaces", {"Authorization": f"Bearer  {TOKEN}"}, {}),
        ("upper case", {"Authorization": f"Bearer {TOKEN.upper()}"}, {}),
        ("other header", {"X-Api-Key": TOKEN}, {}),
        ("query token", {}, {"token": TOKEN}),
        ("query access_token", {}, {"access_token": TOKEN}),
        ("query authorization", {}, {"authorization": f"Bearer {TOKEN}"}),
    ]


def test_requests_without_the_token_get_401_and_no_tool_runs(
    token_server: InProcessServer, caplog: pytest.LogCaptureFixture
) -> None:
    refused = []
    with caplog.at_level(logging.INFO, logger="mcp-server"), httpx.Client() as client:
        for name, headers, params in bad_credentials():
            for method in ("POST", "GET", "DELETE"):
                response = client.request(
                    method,
                    token_server.url,
                    params=params,
                    json=search_rpc() if method == "POST" else None,
                    headers={**RPC_HEADERS, **headers},
                )
                refused.append((name, method, response.status_code))
        assert {status for _, _, status in refused} == {401}, refused
        assert token_server.backend.client.calls == 0
        assert TOOL_RAN not in caplog.text

        # The counter and the log do see a request that carries the token.
        response = client.post(
            token_server.url,
            json=search_rpc(),
            headers={**RPC_HEADERS, "Authorization": f"Bearer {TOKEN}"},
        )
        assert response.status_code == 200
        assert results(CallToolResult.model_validate(response.json()["result"]))
        assert token_server.backend.client.calls == 1
        assert TOOL_RAN in caplog.text


def test_401_says_how_to_authenticate(token_server: InProcessServer) -> None:
    response = httpx.post(token_server.url, json=search_rpc(), headers=RPC_HEADERS)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in response.json()["error"]["message"]


def test_the_sdk_client_with_the_token_works_and_without_it_is_told_why(
    token_server: InProcessServer,
) -> None:
    good = {"Authorization": f"Bearer {TOKEN}"}
    hits = results(call_tool(token_server.url, "search_notes", {"query": "bread"}, headers=good))
    assert hits[0]["source"] == "cooking/bread.md"
    with pytest.raises((MCPError, BaseExceptionGroup)) as refused:
        call_tool(token_server.url, "list_tags", headers={"Authorization": "Bearer nope"})
    error = refused.value
    while isinstance(error, BaseExceptionGroup):  # the SDK client raises through task groups
        error = error.exceptions[0]
    assert isinstance(error, MCPError) and "bearer token" in error.message


def test_health_stays_open_without_the_token_but_not_to_hostile_hosts(
    token_server: InProcessServer,
) -> None:
    assert httpx.get(f"{token_server.base}/health").status_code == 200
    evil = httpx.get(f"{token_server.base}/health", headers={"Host": "evil.com"})
    assert evil.status_code == 421


def test_tool_errors_pass_through_the_token_check(store_copy) -> None:
    settings = make_settings(
        "http://127.0.0.1:9", store_copy(), MCP_PORT=free_port(), MCP_TOKEN=TOKEN
    )
    with serve_in_process(settings) as app:
        result = call_tool(
            app.url, "search_notes", {"query": "x"}, headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert "embedder failed" in error_text(result)
