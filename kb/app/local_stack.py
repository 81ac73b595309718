"""Everything on the host, no Docker: the embedder and the MCP server as two child processes,
with embedded storage (QDRANT_PATH, Qdrant's engine in-process). `local.py` runs it.

The embedder listens where EMBED_URL points (it must be this machine) and loads EMBED_MODEL from
a folder or the Hugging Face cache, offline unless the user allows downloads. The MCP server
runs with MCP_WATCH=true (the folder watcher in-process) and holds the storage folder, so
the scripts go through it (kb.app.notes). Ctrl-C (or SIGTERM) stops both; so does either
one exiting: this process stops each child once and says so in one line (the children lead
process groups of their own, so the terminal's Ctrl-C does not reach them twice). On Linux each
child also dies with this process (kb.app.process), so a killed parent leaves no orphan behind.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import NoReturn
from urllib.parse import urlsplit

from kb.app.process import Child
from kb.core.errors import ConfigError, StoreError
from kb.core.settings import DEFAULT_STORAGE, REPO_ROOT, Settings

EMBEDDER = REPO_ROOT / "embedder" / "app.py"
MCP_SERVER = REPO_ROOT / "mcp" / "server.py"
READY_S = 600.0  # loading Qwen3 on a slow laptop takes minutes
STOP_S = 20.0
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
# what the embedder imports beyond the host's packages: embedder/app.py's header pins them
EMBEDDER_STACK = ("torch", "transformers", "fastapi")


def check_installed() -> None:
    """ConfigError naming the command when the embedder's stack is missing from this venv."""
    missing = [name for name in EMBEDDER_STACK if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"the embedder's stack is not installed ({', '.join(missing)} missing): run "
            "`make local`, which installs it, or `uv pip install -r embedder/app.py`"
        )


def child_env(settings: Settings) -> dict[str, str]:
    """The environment both children run with: embedded storage, the watcher on, offline."""
    url = urlsplit(settings.EMBED_URL)
    if url.hostname not in LOCAL_HOSTS or url.port is None:
        raise ConfigError(
            f"EMBED_URL: {settings.EMBED_URL!r} must be http://127.0.0.1:PORT for make local "
            "(the embedder it starts listens there)"
        )
    if not settings.QDRANT_PATH:
        raise ConfigError(
            "QDRANT_URL: make local runs embedded storage (QDRANT_PATH), but QDRANT_URL or "
            "QDRANT_API_KEY names a Qdrant server; remove them from .env and the environment, "
            f"or set QDRANT_PATH (e.g. {DEFAULT_STORAGE})"
        )
    env = dict(os.environ)
    env |= {
        "QDRANT_PATH": settings.QDRANT_PATH,
        "EMBED_HOST": url.hostname,
        "EMBED_PORT": str(url.port),
        "MCP_WATCH": "true",
        "PYTHONUNBUFFERED": "1",
    }
    env.setdefault("HF_HUB_OFFLINE", "1")  # no network: the model is a folder or cached
    return env


class Stack:
    def __init__(self, settings: Settings, say: Callable[[str], None]) -> None:
        self.settings = settings
        self.say = say
        self.children: list[Child] = []

    def start(self) -> None:
        check_installed()
        env = child_env(self.settings)
        for name, script in (("embedder", EMBEDDER), ("MCP server", MCP_SERVER)):
            if script == MCP_SERVER:
                self.index()  # while the embedder loads its model
            argv = [sys.executable, str(script)]
            child = Child(name, argv, env=env, die_with_parent=True, own_group=True)
            self.children.append(child)
        embedder, server = self.children
        base = self.settings.mcp_url.removesuffix("/mcp")
        health = f"{self.settings.EMBED_URL.rstrip('/')}/health"
        # 500: the model cannot load (not in the cache, say), and never will: no 10-minute wait
        embedder.wait_ready(health, READY_S, failed=(500,), siblings=[server])
        self.say(f"embedder ready at {self.settings.EMBED_URL}")
        # the server answers; 503 says what it still waits for (e.g. a first ingest)
        server.wait_ready(f"{base}/health", READY_S, ready=(200, 503), siblings=[embedder])
        self.say(f"MCP server ready at {self.settings.mcp_url}")
        self.say(f"storage: {self.settings.QDRANT_PATH}; Ctrl-C stops both")

    def index(self) -> None:
        """Before the server holds the folder: carry over a collection an older version left in
        the old layout (Store.carry_over), then build the search index that ingests through the
        server left unbuilt (kb.store.optimize); the engine blocks its whole process meanwhile."""
        from kb.store import optimize
        from kb.store.points import Store

        names = [self.settings.COLLECTION, self.settings.CODE_COLLECTION]
        try:
            store = Store.open(names[0], path=self.settings.QDRANT_PATH)
        except StoreError:
            return  # held by another process: the MCP server says so
        with store:
            store.carry_over()
            optimize.after_ingest(store, names, written=0, say=self.say)

    def check_alive(self) -> None:
        for child in self.children:
            child.check_alive()

    def wait(self) -> NoReturn:
        """Until a child stops (check_alive raises, naming it) or Ctrl-C."""
        while True:
            self.check_alive()
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop each child once, the MCP server first (its watcher may be waiting for the
        embedder, which answers meanwhile); one line per child."""
        for child in reversed(self.children):
            if not child.running():
                continue
            child.send(signal.SIGINT)  # as Ctrl-C does: a clean shutdown
            if child.wait_stopped(STOP_S):
                self.say(f"stopped the {child.name}")
            else:
                self.say(f"the {child.name} did not stop in {STOP_S:.0f} s: killed")
