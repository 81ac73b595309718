"""One error type and one OpenAI-style envelope for every failure the service answers with.

`{"error": {"message", "type", "param", "code"}}` — request validation, 404/405, body limits,
overload, loading and unexpected errors alike. Unexpected errors are logged with their traceback
and answered with a fixed message: exception text can carry user input, so it never reaches
the client.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("embedder.errors")

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


class ModelLoadError(Exception):
    """The configured model cannot be served; the message says why (shown on /health)."""


def not_downloaded(setting: str, name: str) -> ModelLoadError:
    """A hub id `name` (EMBED_MODEL, RERANK_MODEL) absent from the Hugging Face cache: the one
    message that says how to fetch it, which /health, the host's status and searches relay."""
    return ModelLoadError(
        f"{setting} {name} is not in the Hugging Face cache: fetch it with `uvx --from "
        f"huggingface-hub hf download {name}` and restart the embedder (the Docker image has "
        f"it; {setting} may also be a folder)"
    )


class APIError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers())


def internal_error() -> APIError:
    return APIError(
        500, "internal error; see the embedder log", type="server_error", code="internal_error"
    )


def not_served(model: str, served: list[str]) -> APIError:
    """A request named a model this service does not serve: OpenAI's answer (404
    model_not_found), naming the ones it does."""
    return APIError(
        404,
        f"model {model!r} is not served here; served: {', '.join(served)}",
        code="model_not_found",
        param="model",
    )


def _validation_error(exc: RequestValidationError) -> APIError:
    errors = list(exc.errors())
    if any(err.get("type") == "json_invalid" for err in errors):
        return APIError(422, "request body is not valid JSON", code="invalid_json")
    parts, param = [], None
    for err in errors[:3]:
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        # Union members (e.g. `str`, `list[str]`) show up in loc; keep only the field path.
        loc = [p for p in loc if not p.startswith(("str", "list[", "function-"))]
        where = ".".join(loc) or "body"
        param = param or where
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if where == "body" and err.get("type") in ("model_attributes_type", "dict_type"):
            msg = "request body must be a JSON object"
        parts.append(f"{where}: {msg}")
    return APIError(422, "; ".join(parts) or "invalid request", code="invalid_request", param=param)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_error(exc).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return APIError(exc.status_code, str(exc.detail), code=code).response()

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return internal_error().response()


class BodyLimitMiddleware:
    """Answer 413 for request bodies over `max_bytes` before anything parses them.

    Checks Content-Length, and for chunked bodies reads at most `max_bytes` + 1 bytes, replaying
    them to the app, so a client cannot make the service buffer more than the limit.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._reject(send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # client went away
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._reject(send)
                return
            if not message.get("more_body", False):
                break
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], receive), send)

    async def _reject(self, send: Send) -> None:
        error = APIError(
            413,
            f"request body exceeds EMBED_MAX_BODY_BYTES={self.max_bytes} bytes; "
            "send fewer or shorter inputs per request",
            code="body_too_large",
        )
        await send_error(send, error, [(b"connection", b"close")])


async def send_error(send: Send, error: APIError, headers: list[tuple[bytes, bytes]]) -> None:
    """The error envelope as a raw ASGI response, for middleware that answers before the app."""
    payload = json.dumps(error.body()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
