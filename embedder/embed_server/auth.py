"""The optional bearer key of the embedding API (EMBED_API_KEY), as one ASGI layer in front of
every route but /health.

OpenAI clients send their `api_key` as `Authorization: Bearer <key>`. A missing or wrong key gets
401 in the one error envelope before anything reads the body; the comparison is constant-time.
/health stays open (container healthchecks send no key) and learns from `key_given` whether
the caller sent the key: without it, it shows only the status, not what the service holds.
"""

from __future__ import annotations

import hmac

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from embed_server.errors import APIError, send_error

OPEN_PATHS = frozenset({"/health"})  # container healthchecks; shows no secret
KEY_GIVEN = "embed_key_given"  # scope["state"] entry: no key set, or the request carried it


def key_given(request: Request) -> bool:
    return bool(request.scope.get("state", {}).get(KEY_GIVEN))


class KeyMiddleware:
    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.key = key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scheme, _, given = Headers(scope=scope).get("authorization", "").partition(" ")
        sent = scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.key)
        if not self.key or sent or scope["path"] in OPEN_PATHS:
            scope.setdefault("state", {})[KEY_GIVEN] = not self.key or sent
            await self.app(scope, receive, send)
            return
        message = (
            "missing API key: send 'Authorization: Bearer <EMBED_API_KEY>'"
            if not given.strip()
            else "invalid API key: it does not match the embedder's EMBED_API_KEY"
        )
        error = APIError(401, message, code="invalid_api_key")
        await send_error(send, error, [(b"www-authenticate", b'Bearer realm="embedder"')])
