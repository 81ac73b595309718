"""Fixtures for the dashboard tests: the MCP server (dashboard included) in-process under a real
uvicorn, on copies of the ingested notes, and real headless Chromium through Playwright.

conftest.py registers this module as a pytest plugin. Three servers, each made once per
session: `reader` (the ingested notes plus a hostile note, one note soft-deleted; writes on),
`syncer` (two new notes waiting in its inbox, for the Sync button) and `guarded` (MCP_TOKEN
set). Chromium is Debian's package (`/usr/bin/chromium`, installed by .ci/run); without it the
browser tests skip locally and fail in CI (CI=true).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import free_port
from ingest_fixtures import write
from mcp_fixtures import make_settings, serve_in_process

from kb.core.settings import Settings

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH") or "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS_VARIABLE = "DASHBOARD_SCREENSHOTS"  # a folder: each page's PNG is saved there
TOKEN = "correct-horse-battery-staple"
EVIL = "evil.md"
EVIL_NOTE = """# Hostile note

It says <script>alert(1)</script> and <img src=x onerror=alert(1)> in its text.
"""
DELETED_NOTE = "misc/fact-00.txt"
WAITING = {
    "new/sailing.md": "# Sailing\n\nReef the mainsail early when the wind picks up.\n",
    "new/huts.md": "# Mountain huts\n\nBook the hut two months ahead in summer.\n",
}


@dataclass(frozen=True)
class Dashboard:
    base: str  # http://127.0.0.1:PORT
    settings: Settings

    def url(self, path: str = "/") -> str:
        return self.base + path


def _serve(settings: Settings, transport: httpx.BaseTransport) -> Iterator[Dashboard]:
    with serve_in_process(settings, transport=transport) as server:
        yield Dashboard(server.base, settings)


def _settings(root: Path, qdrant: Path, **overrides: Any) -> Settings:
    """Settings of a dashboard over `qdrant`, the embedder in this process (embedder_fixtures)."""
    return make_settings(
        IN_PROCESS_EMBED_URL,
        qdrant,
        NOTES_DIR=root / "data",
        STATE_DIR=root / "state",
        MCP_PORT=free_port(),
        **overrides,
    )


@pytest.fixture(scope="session")
def reader(
    store_copy: Callable[[], Path],
    embedder_transport: httpx.BaseTransport,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Dashboard]:
    """The ingested notes, plus EVIL_NOTE ingested through the inbox; DELETED_NOTE deleted."""
    from kb.app import ingest
    from kb.app.backend import embed_client, open_store
    from kb.ingest import lifecycle

    root = tmp_path_factory.mktemp("dash-reader")
    write(root / "data" / EVIL, EVIL_NOTE)
    settings = _settings(root, store_copy(), MCP_WRITE_TOOLS=True)
    with (
        embed_client(settings, transport=embedder_transport) as client,
        open_store(settings) as store,
    ):
        assert ingest.run(settings, client, store).added == [EVIL]
        lifecycle.soft_delete(store, DELETED_NOTE)
    yield from _serve(settings, embedder_transport)


@pytest.fixture(scope="session")
def syncer(
    store_copy: Callable[[], Path],
    embedder_transport: httpx.BaseTransport,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Dashboard]:
    """The ingested notes, and WAITING in the inbox for the Sync button (writes on: it needs
    them, as restore and delete do)."""
    root = tmp_path_factory.mktemp("dash-syncer")
    for name, text in WAITING.items():
        write(root / "data" / name, text)
    yield from _serve(_settings(root, store_copy(), MCP_WRITE_TOOLS=True), embedder_transport)


@pytest.fixture(scope="session")
def guarded(
    store_copy: Callable[[], Path],
    embedder_transport: httpx.BaseTransport,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Dashboard]:
    root = tmp_path_factory.mktemp("dash-guarded")
    (root / "data").mkdir()
    yield from _serve(_settings(root, store_copy(), MCP_TOKEN=TOKEN), embedder_transport)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the browser tests' module. Not longer: Playwright's sync API
    keeps an event loop marked running in this thread, where anyio.run (the MCP client
    helpers) would then refuse to start one."""
    if not CHROMIUM.is_file():
        message = f"no Chromium at {CHROMIUM}: `make chromium` (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI must run the browser tests")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context (no cookies) and page, 1000x700; every dialog is recorded
    (and dismissed) in `page.dialogs`."""
    context = browser.new_context(viewport={"width": 1000, "height": 700})
    opened = context.new_page()
    opened.dialogs = []
    opened.accept_dialogs = False  # a test that confirms sets it

    def record(dialog: Any) -> None:
        opened.dialogs.append(dialog.message)
        if opened.accept_dialogs:
            dialog.accept()
        else:
            dialog.dismiss()

    opened.on("dialog", record)
    opened.set_default_timeout(30_000)
    yield opened
    context.close()


def sign_in(page: Any, dashboard: Dashboard | str, token: str = TOKEN) -> None:
    """Sign in through the login form (`dashboard`: a Dashboard or a server's base URL)."""
    base = dashboard.base if isinstance(dashboard, Dashboard) else dashboard
    page.goto(base + "/login")
    page.fill("#token", token)
    page.click("#login-form button")
    page.wait_for_url(base + "/")


def screenshot(page: Any, name: str) -> None:
    """Save the page as NAME.png under $DASHBOARD_SCREENSHOTS (the test artifacts), if set."""
    folder = os.environ.get(SCREENSHOTS_VARIABLE)
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    target = Path(folder) / f"{name}.png"
    page.screenshot(path=str(target), full_page=False)
    assert target.stat().st_size > 1000
