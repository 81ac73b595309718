"""Everything on the host, no Docker: the embedder and the MCP server as two child processes,
with embedded storage (QDRANT_PATH, Qdrant's engine in-process). `local.py` runs it.

The embedder listens where EMBED_URL points (it must be this machine) and loads EMBED_MODEL from
a folder or the Hugging Face cache, offline unless the user allows downloads. The MCP server
runs with MCP_WATCH=true (the folder watcher in-process) and holds the storage folder, so
`ingest.py` hands its runs to it (kb.app.handoff). Ctrl-C (or SIGTERM) stops both; so does either
one exiting. On Linux each child also dies with this process (PR_SET_PDEATHSIG), so a killed
parent leaves no orphan behind.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from kb.core.errors import ConfigError, StoreError
from kb.core.settings import REPO_ROOT, Settings

EMBEDDER = REPO_ROOT / "embedder" / "app.py"
MCP_SERVER = REPO_ROOT / "mcp" / "server.py"
DEFAULT_STORAGE = "qdrant_data"
READY_S = 600.0  # loading Qwen3 on a slow laptop takes minutes
STOP_S = 20.0
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def child_env(settings: Settings) -> dict[str, str]:
    """The environment both children run with: embedded storage, the watcher on, offline."""
    url = urlsplit(settings.EMBED_URL)
    if url.hostname not in LOCAL_HOSTS or url.port is None:
        raise ConfigError(
            f"EMBED_URL: {settings.EMBED_URL!r} must be http://127.0.0.1:PORT for make local "
            "(the embedder it starts listens there)"
        )
    if "QDRANT_URL" in settings.model_fields_set:
        raise ConfigError(
            "QDRANT_URL: make local runs embedded storage (QDRANT_PATH, qdrant_data/ by "
            "default); remove QDRANT_URL from .env and the environment"
        )
    env = dict(os.environ)
    env |= {
        "QDRANT_PATH": settings.QDRANT_PATH or str(REPO_ROOT / DEFAULT_STORAGE),
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
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self) -> None:
        env = child_env(self.settings)
        for name, script in (("embedder", EMBEDDER), ("MCP server", MCP_SERVER)):
            if script == MCP_SERVER:
                self.index()  # while the embedder loads its model
            proc = subprocess.Popen(
                [sys.executable, str(script)], env=env, cwd=REPO_ROOT, preexec_fn=_die_with_parent
            )
            self.children.append((name, proc))
        base = self.settings.mcp_url.removesuffix("/mcp")
        self._wait(f"{self.settings.EMBED_URL.rstrip('/')}/health", "embedder")
        self.say(f"embedder ready at {self.settings.EMBED_URL}")
        self._wait(f"{base}/health", "MCP server", any_status=True)
        self.say(f"MCP server ready at {self.settings.mcp_url}")
        self.say(f"storage: {env_storage(self.settings)}; Ctrl-C stops both")

    def index(self) -> None:
        """Before the server holds the folder: carry over a collection an older version left in
        the old layout (Store.carry_over), then build the search index that ingests through the
        server left unbuilt (kb.store.optimize); the engine blocks its whole process meanwhile."""
        from kb.store import optimize
        from kb.store.points import Store

        names = [self.settings.COLLECTION, self.settings.CODE_COLLECTION]
        try:
            store = Store.open(names[0], path=env_storage(self.settings))
        except StoreError:
            return  # held by another process: the MCP server says so
        with store:
            store.carry_over()
            optimize.after_ingest(store, names, written=0, say=self.say)

    def _wait(self, url: str, name: str, *, any_status: bool = False) -> None:
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                status = httpx.get(url, timeout=5).status_code
                if status == 200 or (any_status and status == 503):
                    return  # the server answers; 503 says what it still waits for
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise ConfigError(f"the {name} did not answer at {url} within {READY_S:.0f} s")

    def check_alive(self) -> None:
        for name, proc in self.children:
            if proc.poll() is not None:
                raise ConfigError(f"the {name} exited (status {proc.returncode}); see its log")

    def wait(self) -> None:
        while True:
            self.check_alive()
            time.sleep(0.5)

    def stop(self) -> None:
        for _, proc in self.children:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # as Ctrl-C does: each shuts down cleanly
        for name, proc in self.children:
            try:
                proc.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                self.say(f"the {name} did not stop in {STOP_S:.0f} s: killed")
                proc.kill()
                proc.wait()


def env_storage(settings: Settings) -> Path:
    return Path(settings.QDRANT_PATH or REPO_ROOT / DEFAULT_STORAGE)
