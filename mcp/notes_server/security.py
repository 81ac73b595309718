"""HTTP security of the MCP server: Host/Origin validation (DNS rebinding), the optional
bearer token and the dashboard's sessions, as one ASGI layer in front of every route; and what
uvicorn's access log may keep of a request.

A sibling module of server.py (imported as `security`: this folder is not a package).
"""

from __future__ import annotations

import hmac
import logging
from typing import Any
from urllib.parse import urlencode

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types import INVALID_REQUEST
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from kb.app.handoff import EVALUATE_PATH, INGEST_PATH, LIFECYCLE_PATH
from kb.core.errors import ConfigError
from kb.core.settings import Settings
from notes_server.sessions import SESSION_COOKIE, Sessions

HEALTH_PATH = "/health"
MCP_PATH = "/mcp"
# The dashboard (every path but /mcp and /health): signed in by a session cookie its login form
# sets (sessions.py); these paths are open without one (the forms themselves, the assets).
LOGIN_PATH = "/login"
LOGOUT_PATH = "/logout"
OPEN_WEB_PATHS = (LOGIN_PATH, LOGOUT_PATH, "/static/")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection, always set explicitly: the SDK only turns it on by itself when
    bound to loopback, and the container binds 0.0.0.0."""
    if settings.MCP_DISABLE_HOST_CHECK:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    port = settings.MCP_PORT
    # The settings add to the loopback defaults, never replace them: the image's healthcheck
    # (and mcp/check.py) ask 127.0.0.1:PORT whatever else is allowed.
    hosts = [f"localhost:{port}", f"127.0.0.1:{port}", *_split(settings.MCP_ALLOWED_HOSTS)]
    origins = [
        f"http://localhost:{port}",
        f"http://127.0.0.1:{port}",
        *_split(settings.MCP_ALLOWED_ORIGINS),
    ]
    for host in hosts:
        if host.startswith("*") or "/" in host or "@" in host:
            raise ConfigError(
                f"MCP_ALLOWED_HOSTS: {host!r} is not a host[:port] value; list exact Host headers "
                "(set MCP_DISABLE_HOST_CHECK=true to turn the check off, which is unsafe)"
            )
    for origin in origins:
        scheme, sep, rest = origin.partition("://")
        if scheme not in ("http", "https") or not sep or not rest or "/" in rest or "@" in rest:
            raise ConfigError(
                f"MCP_ALLOWED_ORIGINS: {origin!r} is not an origin like http://localhost:8000 "
                "(set MCP_DISABLE_HOST_CHECK=true to turn the check off, which is unsafe)"
            )
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def is_web(path: str) -> bool:
    """A dashboard path: not the MCP endpoint, not the health check, not the scripts' hand-off
    routes (each needs its own key header, which no cross-site page can send: a custom header
    needs a CORS preflight this server never grants)."""
    if path in (HEALTH_PATH, MCP_PATH, INGEST_PATH, LIFECYCLE_PATH, EVALUATE_PATH):
        return False
    return not path.startswith(MCP_PATH + "/")


class Guard:
    """Outermost ASGI layer: Host/Origin validation on every route (the SDK checks only /mcp),
    then the bearer token on every route but /health. Nothing behind it runs for a rejected
    request. A token in the query string does not count. Rejections carry a JSON-RPC error body,
    which the SDK client shows to the user instead of a bare status.

    Dashboard paths (`is_web`) also accept a session cookie (sessions.py, HttpOnly,
    SameSite=Strict; never the token, and never accepted off the dashboard), and a page asked
    for without one redirects to the login form. Every request there that can change something
    (not GET/HEAD/OPTIONS) must carry an allowed Origin (browsers always send one with a POST),
    so another site cannot post a form to it.

    GET /mcp, the event stream for messages a server sends unasked, is refused (405, as the
    protocol allows): this server is stateless and never sends one, so a stream held open
    would only keep a file open in this process for as long as the client liked."""

    def __init__(
        self,
        app: ASGIApp,
        security: TransportSecuritySettings,
        token: str,
        sessions: Sessions | None = None,
    ) -> None:
        self.app = app
        self.hosts = TransportSecurityMiddleware(security)
        self.token = token.encode()
        self.sessions = sessions or Sessions()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            rejected = await self._check(scope, receive)
            if rejected is not None:
                await rejected(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _check(self, scope: Scope, receive: Receive) -> Response | None:
        refused = await self.hosts.validate_request(Request(scope, receive))
        if refused is not None:
            header = "Host" if refused.status_code == 421 else "Origin"
            setting = "MCP_ALLOWED_HOSTS" if header == "Host" else "MCP_ALLOWED_ORIGINS"
            value = Headers(scope=scope).get(header.lower(), "")[:200]
            return _refusal(
                refused.status_code,
                f"{header} header {value!r} not allowed: add it to {setting} (comma-separated)",
            )
        path = scope["path"]
        web = is_web(path)
        headers = Headers(scope=scope)
        if web and scope["method"] not in SAFE_METHODS and not self._same_site(headers):
            return PlainTextResponse(
                "cross-site request refused: this form only accepts posts from the dashboard's "
                "own pages (Origin header missing or not allowed, see MCP_ALLOWED_ORIGINS)",
                status_code=403,
            )
        signed_in = await self._signed_in(scope, path, web, headers)
        if signed_in is not None:
            return signed_in
        if path == MCP_PATH and scope["method"] == "GET":
            return _refusal(
                405,
                "this server is stateless: it sends no messages unasked, so it opens no event "
                "stream; send each request with POST",
                {"Allow": "POST"},
            )
        return None

    async def _signed_in(
        self, scope: Scope, path: str, web: bool, headers: Headers
    ) -> Response | None:
        """None when the request may go on: no token set, /health, the bearer token, or on
        the dashboard a live session or an open path."""
        if not self.token or path == HEALTH_PATH:
            return None
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), self.token):
            return None
        if web:
            session = Request(scope).cookies.get(SESSION_COOKIE, "")
            if (session and self.sessions.valid(session)) or path.startswith(OPEN_WEB_PATHS):
                return None
            if scope["method"] in SAFE_METHODS:
                target = path + (
                    f"?{scope['query_string'].decode()}" if scope["query_string"] else ""
                )
                return RedirectResponse(f"{LOGIN_PATH}?{urlencode({'next': target})}", 303)
            return PlainTextResponse("sign in first: open the dashboard and enter the token", 401)
        return _refusal(
            401,
            "missing or wrong bearer token: send 'Authorization: Bearer <MCP_TOKEN>'",
            {"WWW-Authenticate": 'Bearer realm="notes"'},
        )

    def _same_site(self, headers: Headers) -> bool:
        """The request's Origin is one the Host check allows (or, with that check off, the
        origin of the Host it was sent to)."""
        origin = headers.get("origin")
        if not origin or origin == "null":
            return False
        settings = self.hosts.settings
        if settings.enable_dns_rebinding_protection:
            return origin in settings.allowed_origins
        return origin.partition("://")[2] == headers.get("host", "")


def _refusal(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


class QuerylessAccessLog(logging.Filter):
    """uvicorn's access lines with each query string replaced by `?<redacted>`: queries hold
    what the user searched for (/search?q=, the preview's q=) and, from a misconfigured client,
    a token (?token=). The line keeps the method, the path and the status."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        # uvicorn: '%s - "%s %s HTTP/%s" %d' % (client, method, path?query, version, status)
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            path, sep, _ = args[2].partition("?")
            if sep:
                record.args = (args[0], args[1], f"{path}?<redacted>", *args[3:])
        return True


def log_config() -> dict[str, Any]:
    """uvicorn's own logging configuration, its access lines through QuerylessAccessLog."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = {
        **LOGGING_CONFIG,
        "filters": {"queryless": {"()": QuerylessAccessLog}},
        "handlers": {name: dict(handler) for name, handler in LOGGING_CONFIG["handlers"].items()},
    }
    config["handlers"]["access"]["filters"] = ["queryless"]
    return config
