"""The hand-off routes: what changes the index, for `ingest.py` while this server holds embedded
storage (kb.app.remote). POST /ingest runs an ingest (the body: IngestOptions.to_json) and
answers its Summary; POST /lifecycle deletes, restores or purges deleted notes; POST /evaluate
measures search for eval.py (kb.app.evaluate.measure). Each runs in this
process, through kb.app.notes.LocalNotes (the one in-process path the scripts also take), and
waits for an ingest holding the lock here (the watcher's, the dashboard's) instead of refusing.
Only a request carrying the key the server wrote into STATE_DIR/server.json is served; the MCP
token (security.Guard) applies before it. An option this server does not know is refused with
400, never dropped."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from kb.app.backend import Backend
from kb.app.handoff import EVALUATE_PATH, INGEST_PATH, KEY_HEADER, LIFECYCLE_PATH
from kb.app.notes import LocalNotes
from kb.core.errors import IngestError, KbError
from kb.ingest.options import IngestOptions

log = logging.getLogger("mcp-server")


def add_ingest_route(server: MCPServer, backend: Backend, key: str) -> None:
    notes = LocalNotes(backend)  # the server builds its search index at start, not per ingest

    def allowed(request: Request) -> bool:
        return hmac.compare_digest(request.headers.get(KEY_HEADER, "").encode(), key.encode())

    async def answer(work: Callable[[], dict[str, Any]]) -> Response:
        try:
            return JSONResponse(await anyio.to_thread.run_sync(work))
        except IngestError as exc:
            done = exc.summary.to_json() if exc.summary is not None else None
            return JSONResponse({"error": str(exc), "summary": done}, status_code=409)
        except KbError as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)

    @server.custom_route(INGEST_PATH, methods=["POST"])
    async def ingest(request: Request) -> Response:
        if not allowed(request):
            return JSONResponse({"error": f"missing or wrong {KEY_HEADER}"}, status_code=403)
        try:
            options = IngestOptions.from_json(await request.json())
        except ValueError as exc:  # not JSON, or not the options
            return JSONResponse({"error": f"bad ingest options: {exc}"}, status_code=400)

        def work() -> dict[str, Any]:
            summary = notes.ingest(options, say=lambda line: None)
            log.info("ingest on request: %s failed", len(summary.failed))
            return {"summary": summary.to_json()}

        return await answer(work)

    @server.custom_route(EVALUATE_PATH, methods=["POST"])
    async def evaluate(request: Request) -> Response:
        if not allowed(request):
            return JSONResponse({"error": f"missing or wrong {KEY_HEADER}"}, status_code=403)
        try:
            body = await request.json()
            limit, paraphrase = int(body["limit"]), bool(body["paraphrase"])
        except (ValueError, KeyError, TypeError) as exc:
            return JSONResponse({"error": f"bad eval request: {exc!r}"}, status_code=400)
        log.info("eval on request: limit=%d", limit)
        return await answer(lambda: {"result": notes.evaluate(limit, paraphrase)})

    @server.custom_route(LIFECYCLE_PATH, methods=["POST"])
    async def lifecycle(request: Request) -> Response:
        if not allowed(request):
            return JSONResponse({"error": f"missing or wrong {KEY_HEADER}"}, status_code=403)
        try:
            body = await request.json()
            action = body["action"]
            if action == "purge":
                days = int(body["days"])
                work: Callable[[], object] = lambda: notes.purge(days)  # noqa: E731
            else:
                source = body["source"]
                if not isinstance(source, str):
                    raise TypeError(f"source must be a note's name, not {source!r}")
                work = {
                    "delete": lambda: notes.delete(source, hard=False),
                    "hard_delete": lambda: notes.delete(source, hard=True),
                    "restore": lambda: notes.restore(source),
                }[action]
        except (ValueError, KeyError, TypeError) as exc:
            return JSONResponse({"error": f"bad lifecycle request: {exc!r}"}, status_code=400)
        log.info("lifecycle on request: %s", action)
        return await answer(lambda: {"result": work()})
