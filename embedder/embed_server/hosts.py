"""Host and Origin checks of the embedding API (DNS rebinding), as the outermost ASGI layer: in
front of every route, /health included, and of the key.

A web page can point a name it controls at 127.0.0.1 and then send requests to this port from
the browser; they carry that name in `Host`. A page of another site posting here carries its
own `Origin`. So only the names this service is reached by pass (421 otherwise): localhost,
127.0.0.1, [::1] and `embedder` (its compose service name, the MCP container's EMBED_URL) on any
port (the name is what a rebinding page controls; the port is whichever one the user published,
e.g. 127.0.0.1:18080 for the container's 8080), and the exact values of EMBED_ALLOWED_HOSTS (e.g.
the cluster's balancer, which passes the client's Host on). An `Origin`, which only browsers
send, must be exactly one of those names on EMBED_PORT or an EMBED_ALLOWED_HOSTS value (403
otherwise): a page served from another local port is another site. Compared ignoring case: no
wildcards, no suffixes.
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


def _name(host: str) -> str | None:
    """The name of a Host value with a port ("[::1]:8080" -> "[::1]"); None without one, or when
    what follows the name is no port."""
    name, colon, port = host.rpartition(":")
    if not colon or not port.isdigit() or len(port) > 5:
        return None
    return name


class HostMiddleware:
    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = {f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")}

    def host_allowed(self, host: str) -> bool:
        return host in self.hosts or _name(host) in DEFAULT_NAMES

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            origin = headers.get("origin")
            host = headers.get("host", "").lower()
            if not self.host_allowed(host):
                error = APIError(
                    421,
                    f"Host header {host[:100]!r} not allowed: add it to EMBED_ALLOWED_HOSTS "
                    "(comma-separated)",
                    code="invalid_host",
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
