"""The embedder in this process: the real app (embed_server.api.create_app) serving the real
MiniLM weights, reached by the host's EmbedClient through an httpx transport (EmbedClient's
`transport`, kb.app.backend.embed_client's, Backend's) instead of a socket. Tests of ingest,
search, store and MCP-tool logic need the embedder's vectors, not its process: those run here in
seconds (marker `unit`); start-up, signals and the HTTP server itself keep `start_embedder`.

conftest.py registers this module as a pytest plugin; the heavy imports (torch through the
embedder's app, starlette's test client) happen inside the fixtures, when a test asks for one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import httpx

# The URL the in-process embedder answers as: a `.test` name never resolves, so a client built
# without the transport fails at once ("unreachable") instead of reaching some other embedder.
IN_PROCESS_EMBED_URL = "http://embedder.in-process.test:8080"


def _app_transport(app_client: Any) -> httpx.BaseTransport:
    """An httpx transport that answers every request through `app_client`: starlette's
    TestClient, which runs the ASGI app on an event loop in its portal thread.

    Why not httpx.ASGITransport: it is async-only, and EmbedClient (like the scripts that use
    it) is synchronous. starlette's TestClient is the maintained sync bridge (the embedder's
    own stack: no new dependency); entered as a context it also runs the app's lifespan, which
    loads the model as the server does. It is built on httpx2 (starlette's client library), not
    on the host's httpx, so each request crosses as its parts: method, URL, headers, body."""
    import httpx

    class AppTransport(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            answer = app_client.request(
                request.method,
                str(request.url),
                headers=request.headers.multi_items(),
                content=request.read(),
            )
            return httpx.Response(
                answer.status_code, headers=answer.headers.multi_items(), content=answer.content
            )

    return AppTransport()


@pytest.fixture(scope="session")
def embedder_transport(minilm_path: Path) -> Iterator[httpx.BaseTransport]:
    """The real embedder app serving MiniLM in this process, already healthy, as an httpx
    transport for clients of IN_PROCESS_EMBED_URL (the settings of `minilm_embedder`: fp32 on
    torch, two threads, a small token budget so that ordinary requests split into several
    micro-batches, no reranker)."""
    from helpers import wait_until
    from starlette.testclient import TestClient

    from embed_server.api import create_app
    from embed_server.config import EmbedderSettings

    settings = EmbedderSettings(
        _env_file=None,  # type: ignore[call-arg]
        EMBED_MODEL=str(minilm_path),
        EMBED_BATCH_TOKENS=1024,
        EMBED_DTYPE="fp32",
        EMBED_BACKEND="torch",
        EMBED_THREADS=2,
        RERANK_MODEL="",
        EMBED_ALLOWED_HOSTS="embedder.in-process.test:8080",
    )
    # a failing request answers 500 in the envelope, as the server does, instead of raising here
    app = create_app(settings)
    with TestClient(app, base_url=IN_PROCESS_EMBED_URL, raise_server_exceptions=False) as client:
        wait_until(lambda: client.get("/health").status_code == 200, 120, "the in-process embedder")
        yield _app_transport(client)
