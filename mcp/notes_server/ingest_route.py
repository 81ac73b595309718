"""POST /ingest: run an ingest in the MCP server's process, for `ingest.py` while this server
holds embedded storage (kb.app.handoff). Only a request carrying the key the server wrote into
STATE_DIR/server.json is served; the MCP token (security.Guard) applies before it. The body is
the run's IngestOptions in their wire form (IngestOptions.from_json): an option this server does
not know is refused with 400, never dropped."""

from __future__ import annotations

import hmac
import logging

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from kb.app.backend import Backend
from kb.app.handoff import INGEST_PATH, KEY_HEADER, Answer
from kb.app.ingest import run
from kb.core.errors import IngestError, KbError
from kb.core.state import State
from kb.ingest.options import IngestOptions
from kb.ingest.progress import format_summary

log = logging.getLogger("mcp-server")


def add_ingest_route(server: MCPServer, backend: Backend, key: str) -> None:
    settings = backend.settings

    @server.custom_route(INGEST_PATH, methods=["POST"])
    async def ingest(request: Request) -> Response:
        if not hmac.compare_digest(request.headers.get(KEY_HEADER, "").encode(), key.encode()):
            return JSONResponse({"error": f"missing or wrong {KEY_HEADER}"}, status_code=403)
        try:
            options = IngestOptions.from_json(await request.json())
        except ValueError as exc:  # not JSON, or not the options
            return JSONResponse({"error": f"bad ingest options: {exc}"}, status_code=400)

        def work() -> Answer:
            with State(settings.STATE_DIR).lock():
                summary = run(settings, backend.client, backend.store(), options)
            return Answer(format_summary(summary), len(summary.failed))

        try:
            answer = await anyio.to_thread.run_sync(work)
        except IngestError as exc:
            done = format_summary(exc.summary) if exc.summary is not None else ""
            return JSONResponse(Answer(done, error=str(exc)).to_json(), status_code=409)
        except KbError as exc:
            return JSONResponse(Answer("", error=str(exc)).to_json(), status_code=409)
        log.info("ingest on request: %s failed", answer.failed)
        return JSONResponse(answer.to_json())
