"""Host and Origin checks of the embedding API (DNS rebinding), as the outermost ASGI layer: in
front of every route, /health included, and of the key.

A web page can point a name it controls at 127.0.0.1 and then send requests to this port from
the browser; they carry that name in `Host`. A page of another site posting here carries its
own `Origin`. So only the Host values this service is reached by pass (421 otherwise): localhost,
127.0.0.1 and [::1] on EMBED_PORT, `embedder` (its compose service name, the MCP container's
EMBED_URL), and EMBED_ALLOWED_HOSTS (e.g. the cluster's balancer, which passes the client's Host
on). An `Origin`, which only browsers send, must be one of those hosts too (403 otherwise).
Compared exactly, ignoring case: no wildcards, no suffixes.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from embed_server.config import EmbedderSettings
from embed_server.errors import APIError, send_error

DEFAULT_NAMES = ("localhost", "127.0.0.1", "[::1]", "embedder")
DEFAULT_HTTP_PORT = 80  # a Host header leaves it out


def allowed_hosts(settings: EmbedderSettings) -> frozenset[str]:
    port = settings.EMBED_PORT
    hosts = {f"{name}:{port}" for name in DEFAULT_NAMES}
    if port == DEFAULT_HTTP_PORT:
        hosts |= set(DEFAULT_NAMES)
    hosts |= {h.strip().lower() for h in settings.EMBED_ALLOWED_HOSTS.split(",") if h.strip()}
    return frozenset(hosts)


class HostMiddleware:
    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = {f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            origin = headers.get("origin")
            if headers.get("host", "").lower() not in self.hosts:
                error = APIError(
                    421, "Host header not allowed (see EMBED_ALLOWED_HOSTS)", code="invalid_host"
                )
                await send_error(send, error, [])
                return
            if origin is not None and origin.lower() not in self.origins:
                error = APIError(
                    403,
                    "Origin not allowed: this API does not serve other sites' pages "
                    "(see EMBED_ALLOWED_HOSTS)",
                    code="invalid_origin",
                )
                await send_error(send, error, [])
                return
        await self.app(scope, receive, send)
