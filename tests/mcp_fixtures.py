"""Fixtures for the MCP server tests: a notes store filled by the real ingest code, the server as
a real process (`python mcp/server.py`) or in-process under uvicorn, and SDK client helpers.

conftest.py registers this module as a pytest plugin, so its fixtures are available by name in
every test module; the plain helpers are imported as usual.

Embedded Qdrant lets one process open a folder at a time, so the notes are ingested once into a
pristine folder that is then closed and copied for every server that needs data.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import REPO_ROOT, ServiceProcess, build_settings, free_port

from kb.core.settings import Settings

# The MCP SDK, uvicorn and kb.app are imported where they are used: every pytest run loads this
# plugin, and a test that uses none of them should not wait seconds for them.
if TYPE_CHECKING:
    import httpx2
    from mcp import Client
    from mcp_types import CallToolResult

SERVER_SCRIPT = REPO_ROOT / "mcp" / "server.py"
CHECK_SCRIPT = REPO_ROOT / "mcp" / "check.py"
SNAPSHOT = Path(__file__).parent / "snapshots" / "tools_list.json"
COLLECTION = "notes"

KIMCHI = """---
tags: [Korean Cuisine, "recipes "]
topic: How I make kimchi at home.
document_date: 2024-03-01
---
# Kimchi

Salt a napa cabbage for two hours, rinse it, then rub in a paste of gochugaru, garlic,
ginger and fish sauce. Ferment it at room temperature for two days, then refrigerate.
"""
BREAD = """---
tags: Baking, RECIPES
---
Knead the dough for ten minutes, let it rise for an hour, shape the loaf and bake it in a
hot oven until the crust is brown and it sounds hollow when tapped.
"""
TOMATOES = """---
tags: [gardening]
document_date: 2023-06-10
---
Tomato seedlings go outside after the last frost, deep enough to bury part of the stem.
Pinch out the side shoots and water at the base, never on the leaves.
"""
SHOCK = """Across a normal shock wave in supersonic flow the pressure and density jump while the
velocity drops below the speed of sound.
"""
RUST = """---
tags: [Programming]
---
In Rust every value has one owner; when the owner goes out of scope the value is dropped.
Borrowing lends access without moving ownership, and the borrow checker enforces it.
"""
# Long enough for several chunks: list_tags counts this note once, its chunks each.
PYTEST_SECTIONS = [
    "Fixtures are functions that pytest calls to build what a test needs; a test asks for "
    "one by naming it as a parameter. ",
    "A fixture's scope (function, module, session) says how long its value lives, so an "
    "expensive resource such as a server process is started once and shared. ",
    "Teardown code follows a yield in the fixture and runs even when the test fails. ",
    "Parametrised tests run the same function once per set of arguments and report each. ",
]
PYTEST = "---\ntags: [python, Programming]\n---\n# Pytest notes\n\n" + "\n\n".join(
    f"## {i}\n\n" + section * 5 for i, section in enumerate(PYTEST_SECTIONS)
)
FACTS = [
    "The Eiffel Tower was finished in 1889 for the World's Fair in Paris.",
    "Honey bees communicate the direction of flowers with a waggle dance.",
    "A haiku has three lines of five, seven and five syllables.",
    "The Pacific is the largest and deepest of the world's oceans.",
    "Chess openings such as the Sicilian Defence start with 1.e4 c5.",
    "Photosynthesis turns carbon dioxide and water into sugar using light.",
    "The violin has four strings tuned in fifths: G, D, A and E.",
    "Marathon runners cover 42.195 kilometres.",
    "Mount Everest grows a few millimetres each year as the plates collide.",
    "Sourdough starter is flour and water colonised by wild yeast and bacteria.",
    "The Rosetta Stone carries the same decree in three scripts.",
    "Octopuses have three hearts and blue blood.",
    "A leap year adds February 29 to keep the calendar aligned with the seasons.",
    "Jupiter's Great Red Spot is a storm larger than Earth.",
    "Espresso is brewed by forcing hot water through finely ground coffee.",
    "The first programmable computers used vacuum tubes.",
]
NOTES: dict[str, str] = {
    "cooking/kimchi.md": KIMCHI,
    "cooking/bread.md": BREAD,
    "garden/tomatoes.md": TOMATOES,
    "aero/shock-waves.txt": SHOCK,
    "code/rust.md": RUST,
    "code/pytest-fixtures.md": PYTEST,
    **{f"misc/fact-{i:02d}.txt": fact + "\n" for i, fact in enumerate(FACTS)},
}
# Notes per tag for NOTES, most used first, then by name (list_tags' `notes` field).
TAG_COUNTS = [
    ("programming", 2),
    ("recipes", 2),
    ("baking", 1),
    ("gardening", 1),
    ("korean cuisine", 1),
    ("python", 1),
]


@dataclass(frozen=True)
class IngestedNotes:
    qdrant_path: Path  # pristine embedded Qdrant folder: copy it, never open it
    chunks: int  # points in the collection
    model: str
    dimensions: int


def make_settings(embed_url: str, qdrant_path: Path, **overrides: Any) -> Settings:
    """Settings over the embedded Qdrant folder `qdrant_path` (helpers.build_settings)."""
    return build_settings(embed_url, QDRANT_PATH=str(qdrant_path), **overrides)


@pytest.fixture(scope="session", name="ingested_notes")
def ingested_notes_fixture(
    tmp_path_factory: pytest.TempPathFactory, embedder_transport: httpx.BaseTransport
) -> IngestedNotes:
    """NOTES ingested by kb.ingest.run (the real MiniLM embedder, in this process: the vectors
    and model name an embedder process serving it gives too) into a closed embedded Qdrant
    folder."""
    from kb.app import ingest
    from kb.app.backend import embed_client, open_store
    from kb.store import collection

    root = tmp_path_factory.mktemp("mcp-notes")
    for relative, text in NOTES.items():
        path = root / "data" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    settings = make_settings(
        IN_PROCESS_EMBED_URL, root / "qdrant", NOTES_DIR=root / "data", STATE_DIR=root / "state"
    )
    with (
        embed_client(settings, transport=embedder_transport) as client,
        open_store(settings) as store,
    ):
        summary = ingest.run(settings, client, store)
        assert not summary.failed, summary.failed
        info = collection.require(store)
    assert info.points > len(FACTS) + 5 > 20, "the corpus must hold more chunks than k's cap"
    return IngestedNotes(root / "qdrant", info.points, info.model or "", info.dimensions)


@pytest.fixture(scope="session", name="store_copy")
def store_copy_fixture(
    ingested_notes: IngestedNotes, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[], Path]:
    """Factory: a fresh copy of the ingested store folder (one per server process)."""

    def copy() -> Path:
        target = tmp_path_factory.mktemp("qdrant-copy") / "qdrant"
        shutil.copytree(ingested_notes.qdrant_path, target)
        return target

    return copy


# --- the server as a process ---------------------------------------------------------------


def server_env(settings: Mapping[str, str]) -> dict[str, str]:
    """Environment for a server or check.py process: nothing from the developer's shell."""
    env = {key: value for key, value in os.environ.items() if key not in Settings.model_fields}
    defaults = {
        "MCP_HOST": "127.0.0.1",
        "MCP_TOKEN": "",
        "MCP_ALLOWED_HOSTS": "",
        "MCP_ALLOWED_ORIGINS": "",
        "MCP_DISABLE_HOST_CHECK": "false",
        "COLLECTION": COLLECTION,
        "EMBED_RETRIES": "0",
        "LOG_LEVEL": "INFO",
    }
    return env | defaults | dict(settings)


class ServerProcess(ServiceProcess):
    """`python mcp/server.py` (what `uv run mcp/server.py` runs) on a free loopback port."""

    def __init__(self, settings: Mapping[str, str], log_path: Path) -> None:
        self.port = free_port()
        base = f"http://127.0.0.1:{self.port}"
        self.url = f"{base}/mcp"
        env = server_env({"MCP_PORT": str(self.port), **settings})
        argv = [sys.executable, str(SERVER_SCRIPT)]
        super().__init__(argv, env, log_path, base, name="MCP server")


ServerFactory = Callable[..., ServerProcess]


@pytest.fixture(scope="module", name="start_server")
def start_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerFactory]:
    """Factory: `start_server(EMBED_URL=..., QDRANT_PATH=...)` -> a listening ServerProcess.
    Every server started is stopped when the module's tests are done."""
    started: list[ServerProcess] = []

    def start(**settings: str) -> ServerProcess:
        server = ServerProcess(settings, tmp_path_factory.mktemp("mcp-log") / "server.log")
        started.append(server)
        server.wait_listening()
        return server

    yield start
    for server in started:
        server.stop()


# --- the server in this process (to look inside: the embedder client's call count) ----------


def server_module() -> ModuleType:
    """The server's module (notes_server.app), imported in-process."""
    return importlib.import_module("notes_server.app")


@dataclass
class InProcessServer:
    backend: Any  # server.Backend
    base: str
    app: Any  # what build_app returned: security.Guard

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"


@contextmanager
def serve_in_process(
    settings: Settings, ingest_key: str = "", transport: httpx.BaseTransport | None = None
) -> Iterator[InProcessServer]:
    """build_app(settings) under a real uvicorn on 127.0.0.1:MCP_PORT, in a thread (with
    `ingest_key`, POST /ingest too; with `transport`, the embedder is the in-process one)."""
    import uvicorn

    module = server_module()
    backend = module.Backend(settings, transport)
    app = module.build_app(backend, ingest_key)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=settings.MCP_PORT,
        log_level="warning",
        ws="none",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        end = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < end, "in-process server did not start"
            time.sleep(0.02)
        yield InProcessServer(backend, f"http://127.0.0.1:{settings.MCP_PORT}", app)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        backend.close()


# --- clients -------------------------------------------------------------------------------


def _client(url: str, headers: Mapping[str, str] | None) -> tuple[httpx2.AsyncClient, Client]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers=dict(headers or {}), timeout=60.0)
    return http, Client(streamable_http_client(url, http_client=http))


def call_tool(
    url: str,
    name: str,
    arguments: dict[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> CallToolResult:
    """One tools/call through the SDK's streamable-HTTP client."""
    import anyio

    async def run() -> CallToolResult:
        http, client = _client(url, headers)
        async with http, client:
            return await client.call_tool(name, arguments or {})

    return anyio.run(run)


def list_tools(url: str, headers: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """tools/list through the SDK client, as the JSON the server sent."""
    import anyio

    async def run() -> list[dict[str, Any]]:
        http, client = _client(url, headers)
        async with http, client:
            listed = await client.list_tools()
        return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]

    return anyio.run(run)


def text_of(result: CallToolResult) -> str:
    return " ".join(getattr(part, "text", "") for part in result.content)


def error_text(result: CallToolResult) -> str:
    """The message of a tool error (fails if the call succeeded)."""
    assert result.is_error, f"expected a tool error, got {text_of(result)}"
    return text_of(result)


def tool_answer(result: CallToolResult) -> dict[str, Any]:
    """A tool's answer as the server sends it: one text block of compact JSON, no structured
    content (docs/design/tool-surface.md). Fails on a tool error, showing it."""
    assert not result.is_error, text_of(result)
    assert result.structured_content is None
    [block] = result.content
    answer = json.loads(getattr(block, "text", ""))
    assert isinstance(answer, dict)
    return answer


def results(result: CallToolResult) -> list[dict[str, Any]]:
    """search_notes' results (fails on a tool error, showing it)."""
    return tool_answer(result)["results"]


RPC_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def search_rpc(query: str = "kimchi", k: int = 1) -> dict[str, Any]:
    """A raw JSON-RPC tools/call of search_notes (stateless servers need no initialize)."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search_notes", "arguments": {"query": query, "k": k}},
    }
