"""The dashboard: a few server-rendered pages beside /mcp (status, sync, search, preview,
deleted notes), for looking at what the index holds and what a query returns.

Jinja2 templates (autoescaped: note text is always shown as text) in templates/, and htmx
(one committed file, no build step) in static/; no asset comes from elsewhere, so it works
offline. security.Guard in front checks Host/Origin, the session cookie (sessions.py) and every
POST's Origin; each page also forbids inline script and framing (CSP). Writes (restore, delete)
exist only with MCP_WRITE_TOOLS=true and take the ingest lock, like the MCP write tools; so does
the Sync button (it moves inbox files into ingested/).

`routes(backend, sessions)` lists them (notes_server.app serves them beside /mcp).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from kb.app import status
from kb.app.backend import Backend, embedder_message, reranker_problem
from kb.content.formats import CODE
from kb.core.errors import EmbedError, KbError, NoteNotFound, StoreError
from kb.core.state import State
from kb.ingest import lifecycle
from kb.search import SearchRequest, search
from kb.search.domains import DOMAINS
from kb.search.filters import Filters
from kb.search.preview import preview
from kb.search.query import MODES, tag_usage
from kb.search.related import related
from notes_server.dashboard_sync import Busy, SyncRunner, stream
from notes_server.security import LOGIN_PATH, LOGOUT_PATH
from notes_server.sessions import SESSION_COOKIE, Sessions

log = logging.getLogger("mcp-server")

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
STATIC_FILES = {"htmx.min.js", "dashboard.js", "dashboard.css"}
SEARCH_MAX_K = 50
# sync logs (/sync/events) open at once: a tab holds one while its sync runs; a client opening
# hundreds would hold as many open files (429 past it)
EVENT_STREAMS = 8
CHART_TAGS = 12
# no inline script or style, nothing from elsewhere, never inside another site's frame
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    # not no-referrer: with it, Chromium sends `Origin: null` on the page's own form posts
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
T = TypeVar("T")

templates = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def when(value: object) -> Markup | object:
    """An ISO 8601 time as `<time>`: readable in UTC here, in the reader's own time zone once
    dashboard.js has run; anything else as it is."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return value
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    shown = moment.strftime("%Y-%m-%d %H:%M") + (" UTC" if moment.tzinfo is not None else "")
    return Markup('<time datetime="{}">{}</time>').format(moment.isoformat(), shown)


templates.filters["when"] = when


def render(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(templates.get_template(name).render(**context), status_code, HEADERS)


async def blocking(fn: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(fn)


def bars(counts: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """Geometry of the notes-per-tag chart (drawn as SVG by the template)."""
    top = counts[:CHART_TAGS]
    most = max((n for _, n in top), default=1)
    return [
        {"label": tag, "count": n, "y": i * 22, "width": max(2, round(260 * n / most))}
        for i, (tag, n) in enumerate(top)
    ]


class Dashboard:
    def __init__(self, backend: Backend, sessions: Sessions) -> None:
        self.backend = backend
        self.settings = backend.settings
        self.sessions = sessions
        self.sync = SyncRunner(backend)
        self.streams = 0  # sync logs open now (one event loop: no lock needed)

    def render(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        # with a token, every page but the login form offers to sign out
        return render(name, status_code, signed=bool(self.settings.MCP_TOKEN),
                      session_hours=self.sessions.ttl_s // 3600, **context)  # fmt: skip

    def store_or_none(self) -> Any:
        try:
            return self.backend.store()
        except StoreError:
            return None

    def _status(self) -> dict[str, Any]:
        store = self.store_or_none()
        report = status.status(self.settings, store)
        embedder: dict[str, Any]
        try:
            info = self.backend.client.health()
            embedder = {"state": "ready", "model": info.get("model"),
                        "dimensions": info.get("dimensions"),
                        "reranker": reranker_problem(info)}  # fmt: skip
        except EmbedError as exc:
            state = "loading" if exc.status == 503 else "down"
            embedder = {"state": state, "error": embedder_message(exc)}
        chart: list[dict[str, Any]] = []
        if report.exists and store is not None:
            with contextlib.suppress(StoreError):  # the chart is extra: the rest still shows
                chart = bars(store.tag_counts())
        return {"report": report, "embedder": embedder, "chart": chart}

    async def status_page(self, request: Request) -> Response:
        return self.render("status.html", page="status", **await blocking(self._status))

    async def status_panel(self, request: Request) -> Response:
        return self.render("_status_panel.html", **await blocking(self._status))

    def _search(self, params: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"hits": [], "error": None, "tags": [], "note": None,
                               "no_good_match": None}  # fmt: skip
        try:
            out["tags"] = [u.tag for u in tag_usage(self.backend.store())]
            if params["q"]:
                request = SearchRequest(
                    params["q"], params["k"], mode=params["mode"], domain=params["domain"],
                    filters=Filters(tags=params["tag"]),
                    rerank=None if params["rerank"] else False, explain=params["explain"],
                )  # fmt: skip
                found = search(self.backend.searcher(), request)
                out["hits"], out["note"] = found.hits, found.note
                out["no_good_match"] = found.no_good_match
        except EmbedError as exc:
            out["error"] = embedder_message(exc)
        except (KbError, ValueError) as exc:
            out["error"] = str(exc)
        return out

    async def search_page(self, request: Request) -> Response:
        query = request.query_params
        try:
            k = max(1, min(SEARCH_MAX_K, int(query.get("k") or 10)))
        except ValueError:
            k = 10
        mode = query.get("mode") if query.get("mode") in MODES else "hybrid"
        domain = query.get("domain") if query.get("domain") in DOMAINS else "all"
        # a link without the switch (or with rerank=on) reranks, as search_notes does
        params = {"q": (query.get("q") or "").strip(), "k": k, "mode": mode, "domain": domain,
                  "rerank": query.get("rerank", "on") == "on",
                  "explain": query.get("explain") == "on",
                  "tag": [t for t in query.getlist("tag") if t]}  # fmt: skip
        # a reranker that did not load: the box is off (and disabled), the page says why
        unranked = await blocking(self.backend.reranker_problem)
        params["rerank"] = params["rerank"] and not unranked
        found = await blocking(lambda: self._search(params))
        found["note"] = found["note"] or unranked
        if found["hits"] or params["q"]:
            log.info("dashboard search mode=%s k=%d hits=%d", mode, k, len(found["hits"]))
        name = "_results.html" if request.headers.get("hx-target") == "results" else "search.html"
        return self.render(name, page="search", params=params, modes=MODES, domains=DOMAINS,
                           unranked=unranked, **found)  # fmt: skip

    async def preview_page(self, request: Request) -> Response:
        source = request.query_params.get("source") or ""
        try:
            hit = int(request.query_params.get("chunk") or "")
        except ValueError:
            hit = None
        code = request.query_params.get("domain") == CODE  # a code hit: the code collection's
        store = self.backend.code_store if code else self.backend.store
        try:
            note = await blocking(lambda: preview(store(), source, hit))
            # a note's backlinks, links and nearest notes (the code collection has no links)
            near = None if code else await blocking(lambda: related(store(), source))
        except NoteNotFound as exc:
            return self.render("message.html", 404, page="search", title="Not found", text=str(exc))
        except StoreError as exc:
            return self.render("message.html", 503, page="search", title="Index", text=str(exc))
        back = request.query_params.get("q")
        return self.render("preview.html", page="search", note=note, hit=hit, back=back,
                           related=near)  # fmt: skip

    def sync_blocked(self) -> str | None:
        """Why the Sync button is off: a read-only server, or one that cannot see the notes."""
        if not self.settings.MCP_WRITE_TOOLS:
            return "this server is read-only: syncing from this page needs MCP_WRITE_TOOLS=true"
        return self.sync.unreachable()

    async def sync_page(self, request: Request) -> Response:
        current = self.sync.current
        return self.render("sync.html", page="sync", blocked=self.sync_blocked(), run=current,
                           running=current is not None and not current.done,
                           read_only=not self.settings.MCP_WRITE_TOOLS)  # fmt: skip

    async def sync_start(self, request: Request) -> Response:
        blocked = self.sync_blocked()
        message, code = None, 200
        if blocked is None:
            try:
                await blocking(self.sync.start)
            except Busy as exc:
                message, code = str(exc), 409
        else:
            code = 409
        partial = request.headers.get("hx-request") == "true"
        if partial:
            code = 200  # htmx swaps only 2xx answers in: the message must show
        return self.render("_sync_run.html" if partial else "sync.html", code, page="sync",
                           blocked=blocked, busy=message, run=self.sync.current,
                           running=message is None and blocked is None,
                           read_only=not self.settings.MCP_WRITE_TOOLS)  # fmt: skip

    async def sync_events(self, request: Request) -> Response:
        if self.streams >= EVENT_STREAMS:
            return Response(f"{EVENT_STREAMS} sync logs are open already: close one", 429,
                            headers={**HEADERS, "Retry-After": "10"})  # fmt: skip
        return EventSourceResponse(self._counted(), headers=HEADERS, ping=15)

    async def _counted(self) -> AsyncIterator[dict[str, str]]:
        """The sync log's events, counted while the stream is open (however it ends)."""
        self.streams += 1
        try:
            async for event in stream(self.sync.current):
                yield event
        finally:
            self.streams -= 1

    def _deleted(self) -> dict[str, Any]:
        try:
            return {"notes": lifecycle.list_deleted(self.backend.store()), "error": None}
        except StoreError as exc:
            return {"notes": [], "error": str(exc)}

    async def deleted_page(self, request: Request) -> Response:
        found = await blocking(self._deleted)
        done = request.query_params.get("done")
        return self.render("deleted.html", page="deleted", writes=self.settings.MCP_WRITE_TOOLS,
                           done=done, **found)  # fmt: skip

    async def deleted_change(self, request: Request) -> Response:
        if not self.settings.MCP_WRITE_TOOLS:
            return self.render("message.html", 403, page="deleted", title="Read-only",
                               text="restoring and deleting need MCP_WRITE_TOOLS=true")  # fmt: skip
        action = request.path_params["action"]
        if action not in ("restore", "delete"):
            return Response("not found", 404)
        form = await request.form()
        source = str(form.get("source") or "")

        def change() -> str:
            with State(self.settings.STATE_DIR).lock():
                store = self.backend.store()
                if action == "restore":
                    return "restored" if lifecycle.restore(store, source) else "not deleted"
                lifecycle.hard_delete(store, [source])
                return "deleted for good"

        try:
            outcome = await blocking(change)
        except KbError as exc:
            return self.render("message.html", 409, page="deleted", title="Not done", text=str(exc))
        log.info("dashboard %s: %s", action, outcome)
        target = "/deleted?" + urlencode({"done": f"{source}: {outcome}"})
        if request.headers.get("hx-request") == "true":  # htmx asked (after its confirm)
            return Response(status_code=204, headers={"HX-Redirect": target})
        return RedirectResponse(target, 303)

    async def login_page(self, request: Request) -> Response:
        target = _local(request.query_params.get("next"))
        return self.render("login.html", page="login", next=target)

    async def login(self, request: Request) -> Response:
        form = await request.form()
        target = _local(str(form.get("next") or "/"))
        given = str(form.get("token") or "")
        token = self.settings.MCP_TOKEN
        if not token or not hmac.compare_digest(given.encode(), token.encode()):
            return self.render("login.html", 401, page="login", next=target, wrong=True)
        response = RedirectResponse(target, 303)
        response.set_cookie(SESSION_COOKIE, self.sessions.open(), max_age=self.sessions.ttl_s,
                            httponly=True, samesite="strict", path="/")  # fmt: skip
        log.info("dashboard sign-in")
        return response

    async def logout(self, request: Request) -> Response:
        self.sessions.close(request.cookies.get(SESSION_COOKIE, ""))
        response = RedirectResponse(LOGIN_PATH, 303)
        response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return Response("not found", 404)
        headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
        return FileResponse(STATIC / name, headers=headers)


def _local(target: str | None) -> str:
    """A redirect target on this site only (a path, never //host or a scheme)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def routes(backend: Backend, sessions: Sessions) -> list[Route]:
    page = Dashboard(backend, sessions)
    return [
        Route("/", page.status_page, methods=["GET"]),
        Route("/status/panel", page.status_panel, methods=["GET"]),
        Route("/search", page.search_page, methods=["GET"]),
        Route("/preview", page.preview_page, methods=["GET"]),
        Route("/sync", page.sync_page, methods=["GET"]),
        Route("/sync", page.sync_start, methods=["POST"]),
        Route("/sync/events", page.sync_events, methods=["GET"]),
        Route("/deleted", page.deleted_page, methods=["GET"]),
        Route("/deleted/{action:str}", page.deleted_change, methods=["POST"]),
        Route(LOGIN_PATH, page.login_page, methods=["GET"]),
        Route(LOGIN_PATH, page.login, methods=["POST"]),
        Route(LOGOUT_PATH, page.logout, methods=["POST"]),
        Route("/static/{name:str}", page.static, methods=["GET"]),
    ]
