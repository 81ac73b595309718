"""MCP server: the user's notes as tools (`search_notes`, `list_tags`) for AI assistants.

Run `uv run mcp/server.py` for streamable HTTP on MCP_HOST:MCP_PORT (path /mcp, stateless, JSON
responses), or `uv run mcp/server.py --stdio` for a client that launches the server itself.
This folder is not a package: the SDK owns the name `mcp`, so this file is only ever run as a
script. Searching and the store live in `kb`; this file only wires them to the protocol.
"""

from __future__ import annotations

import argparse
import hmac
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types import INVALID_REQUEST, ToolAnnotations
from pydantic import BaseModel, Field, StringConstraints, ValidationError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from embed_client import EmbedClient, EmbedError
from kb import search as kb_search
from kb import store as kb_store
from kb.settings import Settings, get_settings

log = logging.getLogger("mcp-server")

MAX_K = 20
HEALTH_PATH = "/health"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
T = TypeVar("T")


class ConfigError(Exception):
    """A setting that would make the server unsafe or unusable; the message names it."""


# --- tool results (the tool surface; tests/snapshots/tools_list.json pins it) --------------


class Note(BaseModel):
    text: str = Field(description="The matching passage (one chunk of a note).")
    source: str | None = Field(description="Note file, relative to the notes folder: cite it.")
    score: float = Field(description="Cosine similarity to the query; higher is closer.")
    tags: list[str] = Field(description="Tags of the note.")
    topic: str | None = Field(description="One-sentence topic of the note, if it has one.")
    document_date: str | None = Field(description="Date the note is about (ISO), if given.")
    date_ingested: str | None = Field(description="When the note was ingested (ISO, UTC).")
    chunk_index: int | None = Field(description="Position of the passage in its note, from 0.")
    line_start: int | None = Field(description="First line of the passage in the file (1-based).")
    line_end: int | None = Field(description="Last line of the passage in the file.")


class SearchResults(BaseModel):
    results: list[Note] = Field(description="Closest passages, best first.")


class TagCount(BaseModel):
    tag: str
    notes: int = Field(description="Number of notes carrying the tag.")


class TagList(BaseModel):
    tags: list[TagCount] = Field(description="Every tag in the notes, most used first.")


Query = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1),
    Field(description="What to look for, in natural language."),
]
Count = Annotated[int, Field(description=f"Number of passages to return, 1-{MAX_K} (clamped).")]
Tags = Annotated[
    list[str] | None,
    Field(
        description="Only search notes carrying at least one of these tags (case and spacing "
        "do not matter). Leave out to search everything."
    ),
]


SEARCH_NOTES = """Search the user's own notes (files they ingested) by meaning; returns the \
closest passages, best first, each with the note file it comes from.

Use this whenever the user asks about something they may have written down. Search unfiltered \
first, in the user's words. Narrow by `tags` only when the user names a domain or area, or when \
the unfiltered results are off-topic; call `list_tags` first so you only pass tags that exist. \
Cite the `source` file of each passage you use. If nothing relevant comes back, say so instead \
of guessing."""

LIST_TAGS = """List every tag in the user's notes with the number of notes carrying it, most \
used first.

Call this before filtering `search_notes` by tags, so you only pass tags that exist; it is also \
a quick overview of what the notes cover."""


# --- backend: one embedder client and one store, shared by every request ------------------


class Backend:
    """Connections the tools use. The store opens on first use, so the server starts (and
    reports why in /health and in tool errors) while Qdrant or the storage folder is not
    available yet, and recovers without a restart once it is."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = EmbedClient(settings=settings)
        self._store: kb_store.Store | None = None
        self._lock = threading.Lock()

    def store(self) -> kb_store.Store:
        with self._lock:
            if self._store is None:
                self._store = kb_store.Store.open(self.settings)
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
        self.client.close()

    def health(self) -> dict[str, Any]:
        """Embedder and store state for GET /health (blocking: run it in a worker thread)."""
        embedder: dict[str, Any] = {"url": self.settings.EMBED_URL}
        try:
            info = self.client.health()
            embedder |= {
                "ready": True,
                "model": info.get("model"),
                "dimensions": info.get("dimensions"),
            }
        except EmbedError as exc:
            embedder |= {"ready": False, "error": embedder_message(exc)}
        store: dict[str, Any] = {"collection": self.settings.COLLECTION}
        try:
            found = self.store().require()
            if embedder["ready"]:
                self.store().check_model(embedder["model"], embedder["dimensions"])
            store |= {"ready": True, "points": found.points, "model": found.model}
        except kb_store.StoreError as exc:
            store |= {"ready": False, "error": str(exc)}
        return {"ok": embedder["ready"] and store["ready"], "embedder": embedder, "store": store}


def embedder_message(exc: EmbedError) -> str:
    """Say what failed and what to do; the model relays this to the user."""
    if exc.status == 503:
        return f"embedder failed: still loading, retry in a minute ({exc.message})"
    if exc.status is None:
        return f"embedder failed: {exc.message}; start the embedder and retry"
    return f"embedder failed: {exc.message}"


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn the failures a user can fix into messages the model sees; anything else is a bug
    and reaches the SDK as a crash (logged with its traceback, generic text to the client)."""
    try:
        yield
    except EmbedError as exc:
        raise ToolError(embedder_message(exc)) from exc
    except kb_store.StoreError as exc:
        raise ToolError(str(exc)) from exc


async def off_loop(fn: Callable[[], T]) -> T:
    """Run a blocking call (sync httpx, qdrant-client) in a worker thread."""
    with tool_errors():
        return await anyio.to_thread.run_sync(fn)


def find(backend: Backend, query: str, k: int, tags: list[str] | None) -> list[kb_search.Hit]:
    """kb's search; no hits at all from an empty collection is an error the user can fix."""
    store = backend.store()
    hits = kb_search.search(store, backend.client, query, k, tags)
    if not hits and store.require().points == 0:
        raise ToolError(
            f"collection '{store.collection}' has no notes yet: put notes in the notes folder "
            "and run ingest.py first"
        )
    return hits


def build_server(backend: Backend) -> MCPServer:
    server = MCPServer(
        "notes",
        instructions="Semantic search over the user's own notes. Cite the source files.",
        log_level=_log_level(backend.settings),
    )
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

    @server.tool(description=SEARCH_NOTES, annotations=read_only)
    async def search_notes(query: Query, k: Count = 5, tags: Tags = None) -> SearchResults:
        k = max(1, min(MAX_K, k))
        started = time.perf_counter()
        hits = await off_loop(lambda: find(backend, query, k, tags))
        # Counts and timings only: queries and note text never reach the log at INFO.
        log.info(
            "search_notes k=%d tags=%d hits=%d %.0f ms",
            k,
            len(tags or ()),
            len(hits),
            (time.perf_counter() - started) * 1000,
        )
        return SearchResults(results=[Note.model_validate(h, from_attributes=True) for h in hits])

    @server.tool(description=LIST_TAGS, annotations=read_only)
    async def list_tags() -> TagList:
        counts = await off_loop(lambda: kb_search.list_tags(backend.store()))
        log.info("list_tags tags=%d", len(counts))
        return TagList(tags=[TagCount(tag=tag, notes=n) for tag, n in counts])

    return server


# --- HTTP: Host/Origin check and bearer token in front of everything ------------------------


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection, always set explicitly: the SDK only turns it on by itself when
    bound to loopback, and the container binds 0.0.0.0."""
    if settings.MCP_DISABLE_HOST_CHECK:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    port = settings.MCP_PORT
    hosts = _split(settings.MCP_ALLOWED_HOSTS) or [f"localhost:{port}", f"127.0.0.1:{port}"]
    origins = _split(settings.MCP_ALLOWED_ORIGINS) or [
        f"http://localhost:{port}",
        f"http://127.0.0.1:{port}",
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


class Guard:
    """Outermost ASGI layer: Host/Origin validation on every route (the SDK checks only /mcp),
    then the bearer token on every route but /health. Nothing behind it runs for a rejected
    request. A token in the query string does not count. Rejections carry a JSON-RPC error body,
    which the SDK client shows to the user instead of a bare status."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings, token: str) -> None:
        self.app = app
        self.hosts = TransportSecurityMiddleware(security)
        self.token = token.encode()

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
            return _refusal(refused.status_code, f"{header} header not allowed (see {setting})")
        if not self.token or scope["path"] == HEALTH_PATH:
            return None
        scheme, _, given = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), self.token):
            return None
        return _refusal(
            401,
            "missing or wrong bearer token: send 'Authorization: Bearer <MCP_TOKEN>'",
            {"WWW-Authenticate": 'Bearer realm="notes"'},
        )


def _refusal(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def build_app(backend: Backend) -> ASGIApp:
    """The HTTP app: /mcp (stateless streamable HTTP, JSON responses) and GET /health."""
    settings = backend.settings
    security = transport_security(settings)
    server = build_server(backend)

    @server.custom_route(HEALTH_PATH, methods=["GET"])
    async def health(request: Request) -> Response:
        report = await anyio.to_thread.run_sync(backend.health)
        return JSONResponse(report, status_code=200 if report["ok"] else 503)

    app = server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=security,
        host=settings.MCP_HOST,
    )
    if not security.enable_dns_rebinding_protection:
        log.warning(
            "Host/Origin validation is OFF (MCP_DISABLE_HOST_CHECK=true): any web page the "
            "browser opens can reach this server through DNS rebinding"
        )
    return Guard(app, security, settings.MCP_TOKEN)


def _log_level(settings: Settings) -> Any:
    level = settings.LOG_LEVEL.upper()
    if level not in LOG_LEVELS:
        raise ConfigError(
            f"LOG_LEVEL: {settings.LOG_LEVEL!r} is not one of {', '.join(LOG_LEVELS)}"
        )
    return level


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--stdio", action="store_true", help="serve over stdin/stdout instead of HTTP"
    )
    args = parser.parse_args(argv)
    try:
        settings = get_settings()
        level = _log_level(settings)
        # Before the SDK configures logging: plain lines on stderr (stdout is the stdio transport).
        logging.basicConfig(
            level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        if level != "DEBUG":  # httpx logs every embedder request at INFO: noise, not news
            logging.getLogger("httpx").setLevel(logging.WARNING)
        backend = Backend(settings)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        print(f"error: {problems}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.stdio:
            build_server(backend).run("stdio")
            return 0
        try:
            app = build_app(backend)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        log.info(
            "serving http://%s:%d/mcp (token %s)",
            settings.MCP_HOST,
            settings.MCP_PORT,
            "required" if settings.MCP_TOKEN else "off",
        )
        uvicorn.run(app, host=settings.MCP_HOST, port=settings.MCP_PORT, log_level=level.lower())
        return 0
    finally:
        backend.close()


if __name__ == "__main__":
    raise SystemExit(main())
