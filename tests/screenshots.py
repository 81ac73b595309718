"""The dashboard's screenshots for README (docs/img/), from a neutral setup: `make screenshots`.

    uv run --group dev python tests/screenshots.py docs/img

What a user of a fresh install sees, not a test machine's paths: the run enters a private mount
namespace (`unshare`, Linux) with an empty /home of its own, where the notes live in
/home/you/notes and /home/you/Obsidian/Main, the state and the storage under /home/you/.local,
and the model is `Qwen/Qwen3-Embedding-0.6B` in /home/you's Hugging Face cache: a tiny Qwen3
laid out like the real folder, at the real 1024 dimensions, with random weights (keyword
matching orders the results; no weights are downloaded). The real embedder process, the real
MCP server's app under uvicorn and Debian's Chromium take the pictures.

Before each screenshot the page's text and HTML are checked for machine paths (MACHINE_PATHS,
and this machine's own temp, home, repository and Python folders): one found stops the run
naming the page, and no PNG is written. Each PNG carries the page's text (an iTXt chunk,
`page-text`), which tests/project/test_docs.py checks again.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

NAMESPACE_FLAG = "KB_SCREENSHOTS_NAMESPACE"  # set inside the private mount namespace
HOME = Path("/home/you")
MODEL_ID = "Qwen/Qwen3-Embedding-0.6B"
TEXT_KEY = "page-text"
# what a machine path in a page looks like: where tests, venvs and checkouts live
MACHINE_PATHS = re.compile(r"/tmp/|/work/|/root/|site-packages|pytest-of|/private/var/|/Users/")
VAULT = {
    "Projects/garden plan.md": "# Garden plan\n\nRaised beds on the south side; tomatoes and "
    "basil together, beans along the fence.\n",
    "Daily/2024-05-02.md": "# 2024-05-02\n\nPlanted the tomato seedlings. Fed the sourdough "
    "starter; it doubled in six hours.\n",
}
SEARCH = "how long do I ferment napa cabbage with chili paste"


def enter_namespace(argv: list[str]) -> int:
    """Run this script again in a private mount namespace whose /home is an empty tmpfs."""
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        print("error: make screenshots needs Linux and unshare (util-linux)", file=sys.stderr)
        return 2
    inner = 'mount -t tmpfs tmpfs /home && exec "$0" "$@"'
    env = {**os.environ, NAMESPACE_FLAG: "1", "KB_REAL_HOME": str(Path.home())}
    command = ["unshare", "--mount", "--map-root-user", "sh", "-c", inner, sys.executable]
    return subprocess.run([*command, __file__, *argv], env=env, check=False).returncode


def own_paths() -> list[str]:
    """This machine's folders that no page may show."""
    from helpers import REPO_ROOT

    paths = {str(REPO_ROOT), tempfile.gettempdir(), sys.prefix, os.environ.get("KB_REAL_HOME")}
    return sorted(p for p in paths if p and p not in ("/", str(HOME)))


def machine_paths(text: str) -> list[str]:
    found = MACHINE_PATHS.findall(text)
    return found + [p for p in own_paths() if p in text]


def with_text(png: bytes, text: str) -> bytes:
    """`png` with an iTXt chunk (UTF-8, uncompressed) holding `text`, before IEND."""
    body = TEXT_KEY.encode() + b"\0\0\0\0\0" + text.encode("utf-8")
    chunk = struct.pack(">I", len(body)) + b"iTXt" + body
    chunk += struct.pack(">I", zlib.crc32(b"iTXt" + body) & 0xFFFFFFFF)
    end = png.rindex(b"IEND") - 4
    return png[:end] + chunk + png[end:]


def shoot(page: Any, name: str, out: Path) -> None:
    text, html = page.inner_text("body"), page.content()
    found = machine_paths(text) + machine_paths(html)
    if found:
        raise SystemExit(f"error: {name}: the page shows machine paths {sorted(set(found))}")
    (out / f"{name}.png").write_bytes(with_text(page.screenshot(full_page=False), text))
    print(f"{name}.png")


def model_in_cache() -> None:
    """`MODEL_ID` in /home/you's Hugging Face cache (the layout `hf download` leaves)."""
    from conftest import build_tiny_qwen3

    repo = HOME / ".cache/huggingface/hub" / f"models--{MODEL_ID.replace('/', '--')}"
    revision = "0" * 40
    build_tiny_qwen3(repo / "snapshots" / revision, hidden_size=1024)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)


def write_notes() -> None:
    from ingest_fixtures import write
    from mcp_fixtures import NOTES

    for name, text in NOTES.items():
        write(HOME / "notes" / name, text)
    for name, text in VAULT.items():
        write(HOME / "Obsidian/Main" / name, text)


def embedder_env(port: int) -> dict[str, str]:
    """The embedder's environment: this machine's caches and home left out."""
    from helpers import EmbedderProcess

    env = EmbedderProcess.environment({"EMBED_MODEL": MODEL_ID, "LOG_LEVEL": "WARNING"}, port)
    for name in ("HF_HOME", "HF_HUB_CACHE", "TRANSFORMERS_CACHE", "XDG_CACHE_HOME"):
        env.pop(name, None)
    return env | {"HOME": str(HOME)}


def pages(base: str, guarded: str, out: Path) -> None:
    from dashboard_fixtures import CHROMIUM, CHROMIUM_FLAGS
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        page = browser.new_page(viewport={"width": 1000, "height": 700})
        page.set_default_timeout(60_000)
        page.goto(base + "/")
        shoot(page, "status", out)
        page.goto(base + "/sync")
        if page.locator("#sync-blocked").count():
            raise SystemExit(f"error: sync page: {page.inner_text('#sync-blocked')}")
        page.click("#sync-button")
        page.wait_for_function(
            "() => { const end = document.getElementById('sync-end');"
            " return !!end && !end.hidden; }"
        )
        shoot(page, "sync", out)
        page.goto(base + "/search?q=" + SEARCH.replace(" ", "+"))
        page.locator(".hit .source").first.wait_for()
        shoot(page, "search", out)
        page.locator(".hit .source").first.click()
        page.wait_for_url(re.compile(r"/preview"))
        shoot(page, "preview", out)
        page.goto(base + "/deleted")
        shoot(page, "deleted", out)
        page.goto(guarded + "/search?q=kimchi")
        page.wait_for_url(re.compile(r"/login"))
        shoot(page, "login", out)
        browser.close()


def neutral_run(out: Path) -> int:
    from dashboard_fixtures import DELETED_NOTE, TOKEN, WAITING
    from helpers import EMBEDDER_APP, build_settings, free_port, serve_in_thread
    from ingest_fixtures import write

    from kb.app.backend import Backend
    from kb.app.ingest import run
    from kb.app.process import Child
    from kb.ingest import lifecycle
    from notes_server.app import build_app

    os.environ["HOME"] = str(HOME)
    HOME.mkdir(parents=True)
    model_in_cache()
    write_notes()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, str(EMBEDDER_APP)]
    with Child("embedder", argv, env=embedder_env(port)) as embedder:
        embedder.wait_ready(f"{url}/health", 300)
        settings = build_settings(
            url,
            NOTES_DIR=HOME / "notes",
            NOTE_FOLDERS=f"vault={HOME / 'Obsidian/Main'}",
            STATE_DIR=HOME / ".local/state/personal-vector-mcp",
            QDRANT_PATH=str(HOME / ".local/share/personal-vector-mcp/qdrant"),
            MCP_WRITE_TOOLS=True,
            MCP_PORT=free_port(),  # the Host check allows the port the server is told
        )
        backend = Backend(settings)
        run(settings, backend.client, backend.store())
        lifecycle.soft_delete(backend.store(), DELETED_NOTE)
        for name, text in WAITING.items():
            write(settings.NOTES_DIR / name, text)
        guarded = build_settings(
            url,
            NOTES_DIR=HOME / "notes",
            STATE_DIR=HOME / ".local/state/guarded",
            QDRANT_PATH=str(HOME / ".local/share/guarded"),
            MCP_TOKEN=TOKEN,
            MCP_PORT=free_port(),
        )
        guard = Backend(guarded)
        with (
            serve_in_thread(build_app(backend), port=settings.MCP_PORT) as base,
            serve_in_thread(build_app(guard), port=guarded.MCP_PORT) as login,
        ):
            pages(base, login, out)
        backend.close()
        guard.close()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/screenshots.py FOLDER", file=sys.stderr)
        return 2
    out = Path(argv[0]).resolve()
    if os.environ.get(NAMESPACE_FLAG) != "1":
        return enter_namespace(argv)
    out.mkdir(parents=True, exist_ok=True)
    return neutral_run(out)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
