"""The optional bearer key of the embedding API (EMBED_API_KEY), as one ASGI layer in front of
every route but /health.

OpenAI clients send their `api_key` as `Authorization: Bearer <key>`. A missing or wrong key gets
401 in the one error envelope before anything reads the body; the comparison is constant-time.
"""

from __future__ import annotations

import hmac

from errors import APIError, send_error
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

OPEN_PATHS = frozenset({"/health"})  # container healthchecks; shows no secret


class KeyMiddleware:
    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.key = key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.key or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        scheme, _, given = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.key):
            await self.app(scope, receive, send)
            return
        message = (
            "missing API key: send 'Authorization: Bearer <EMBED_API_KEY>'"
            if not given.strip()
            else "invalid API key: it does not match the embedder's EMBED_API_KEY"
        )
        error = APIError(401, message, code="invalid_api_key")
        await send_error(send, error, [(b"www-authenticate", b'Bearer realm="embedder"')])
