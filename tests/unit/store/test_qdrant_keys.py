"""A secured Qdrant's refusals, through the real qdrant-client, become one error that names
QDRANT_API_KEY, never a traceback. No Qdrant server runs here, so a real HTTP server on loopback
answers as Qdrant does with `service.api_key` and `service.read_only_api_key` set: 401 for a
missing or wrong `api-key` header, 403 for a write made with the read-only key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import serve_in_thread
from ingest_fixtures import make_settings, run_script, script_env
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from kb.core.errors import StoreError
from kb.store import collection
from kb.store.points import Store

READ_WRITE = "rw-key-7f3a9c"
READ_ONLY = "ro-key-1b2d4e"
READ_PATHS = ("/points/query", "/points/scroll", "/points/count", "/exists")


def _ok(result: object) -> JSONResponse:
    return JSONResponse({"result": result, "status": "ok", "time": 0.0})


async def _qdrant(request: Request) -> Response:
    key = request.headers.get("api-key")
    if key is None:
        return PlainTextResponse(
            "Must provide an API key or an Authorization bearer token", status_code=401
        )
    if key not in (READ_WRITE, READ_ONLY):
        return PlainTextResponse("Invalid API key or JWT", status_code=401)
    path = request.url.path
    reading = request.method == "GET" or path.endswith(READ_PATHS)
    if key == READ_ONLY and not reading:
        return PlainTextResponse("Write access denied", status_code=403)
    if path == "/collections":
        return _ok({"collections": []})
    if path.endswith("/exists"):
        return _ok({"exists": False})
    if path.endswith("/index"):  # a payload index
        return _ok({"operation_id": 1, "status": "completed"})
    return _ok(True)


@pytest.fixture(scope="module")
def secured_qdrant() -> Iterator[str]:
    app = Starlette(routes=[Route("/{path:path}", _qdrant, methods=["GET", "POST", "PUT"])])
    with serve_in_thread(app) as url:
        yield url


@pytest.mark.parametrize("key", ["", "not-the-key"], ids=["missing", "wrong"])
def test_a_missing_or_wrong_key_is_one_error_naming_qdrant_api_key(
    secured_qdrant: str, key: str
) -> None:
    with pytest.raises(StoreError) as refused:
        Store.open("notes", url=secured_qdrant, api_key=key)
    message = str(refused.value)
    assert "QDRANT_API_KEY" in message and "HTTP 401" in message
    assert "Traceback" not in message and "not-the-key" not in message


def test_the_read_only_key_reads_but_a_write_names_the_read_write_key(secured_qdrant: str) -> None:
    with Store.open("notes", url=secured_qdrant, api_key=READ_ONLY) as store:
        assert collection.info(store) is None  # reading is allowed
        with pytest.raises(StoreError) as refused:
            collection.create(store, "some-model", 8)
    message = str(refused.value)
    assert "HTTP 403" in message and "read-only" in message and "QDRANT_API_KEY" in message


def test_the_read_write_key_may_write(secured_qdrant: str) -> None:
    with Store.open("notes", url=secured_qdrant, api_key=READ_WRITE) as store:
        collection.create(store, "some-model", 8)  # the same write the read-only key may not do


def test_a_script_with_a_wrong_key_prints_one_line_naming_the_setting(
    secured_qdrant: str, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path)
    env = script_env(settings, QDRANT_URL=secured_qdrant, QDRANT_API_KEY="not-the-key")
    env.pop("QDRANT_PATH", None)
    done = run_script("query.py", "kimchi", env=env, cwd=tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "not-the-key" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "QDRANT_API_KEY" in errors[0], done.stderr
