"""Small helpers shared by tests: free ports, polling with a deadline, embedder processes, a model
whose loading waits for the test, apps served in a thread."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from kb.app.process import Child, ChildError
from kb.core.settings import Settings

REPO_ROOT = Path(__file__).resolve().parent.parent
EMBEDDER_APP = REPO_ROOT / "embedder" / "app.py"
UNREACHABLE_EMBEDDER = "http://127.0.0.1:9"  # discard port: nothing listens there


@cache
def script_module(path: str) -> ModuleType:
    """A root script (query.py, ingest.py, ...) as a module: the scripts are not a package, and
    the repository root is not on sys.path under `uv run pytest`."""
    name = path.replace("/", "_").removesuffix(".py") + "_script"
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def register_bench() -> None:
    """bench/ as the package `bench`, as the benchmarks import it when run as files: it is a
    folder of the checkout, not installed (not part of the product), the repository root is not
    on sys.path under `uv run pytest`, and a folder tests/bench/ would pass for a namespace
    package of that name. Done once, before any test module imports it."""
    folder = REPO_ROOT / "bench"
    if getattr(sys.modules.get("bench"), "__file__", None) == str(folder / "__init__.py"):
        return
    spec = importlib.util.spec_from_file_location(
        "bench", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules["bench"] = package
    spec.loader.exec_module(package)


def bench_json(script: str, embedder_url: str, *args: str, timeout: float = 600) -> tuple[str, Any]:
    """Run bench/`script` with `--json` against the embedder at `embedder_url`; it must succeed.
    Its output, and its last line (the figures) read as JSON."""
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / script), *args, "--json"],
        cwd=REPO_ROOT,
        env={**os.environ, "EMBED_URL": embedder_url},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads(proc.stdout.strip().splitlines()[-1])


def build_settings(
    embed_url: str = UNREACHABLE_EMBEDDER, root: Path | None = None, **overrides: Any
) -> Settings:
    """The suite's one Settings builder: only what the test passes (no `.env`; conftest's
    controlled_settings keeps the shell's variables out), no embedding retries, the collection
    `notes`. `root`: notes in root/data (created), state in root/state, embedded Qdrant in
    root/qdrant."""
    values: dict[str, Any] = {"EMBED_URL": embed_url, "COLLECTION": "notes", "EMBED_RETRIES": 0}
    if root is not None:
        (root / "data").mkdir(exist_ok=True)
        values |= {
            "NOTES_DIR": root / "data",
            "STATE_DIR": root / "state",
            "QDRANT_PATH": str(root / "qdrant"),
        }
    return Settings(_env_file=None, **(values | overrides))


@contextmanager
def torch_threads_kept() -> Iterator[None]:
    """Restore torch's thread count afterwards: loading or running an in-process Embedder sets
    it (EMBED_THREADS), and it is process-wide state a later test would inherit."""
    import torch

    before = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(before)


_GIVEN: set[int] = set()  # ports free_port handed out in this process


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (the OS picks it), never one handed
    out before in this process: two asked for one after the other (an embedder's and the MCP
    server's) were once the same port, freed by the first and picked again."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def wait_until(condition: Callable[[], object], deadline_s: float = 60.0, what: str = "") -> None:
    """Poll `condition` until it is true; AssertionError after `deadline_s` seconds."""
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, f"{what or 'condition'} not met after {deadline_s:.0f}s"
        time.sleep(0.02)


def wait_http(
    url: str, deadline_s: float = 60.0, *, proc: subprocess.Popen | None = None
) -> httpx.Response:
    """Poll GET `url` until it answers 200 and return that response.

    Connection errors and non-200 answers are retried until `deadline_s` seconds have passed, then
    AssertionError names the last status seen. When `proc` is given and it exits, fail at once.
    """
    end = time.monotonic() + deadline_s
    last = "no answer"
    with httpx.Client(timeout=5.0) as client:
        while True:
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"{url}: server process exited with {proc.returncode}")
            try:
                response = client.get(url)
                if response.status_code == 200:
                    return response
                last = f"HTTP {response.status_code}: {response.text[:200]}"
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}"
            if time.monotonic() > end:
                raise AssertionError(f"{url} not ready after {deadline_s:.0f}s ({last})")
            time.sleep(0.05)


class ServiceProcess(Child):
    """A real service process (kb.app.process.Child), its output in `log_path` so a failing
    test can show it; a failure to start is an AssertionError carrying the log's tail."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        log_path: Path,
        base: str,
        name: str = "service",
    ) -> None:
        self.base = base  # http://127.0.0.1:PORT
        super().__init__(name, argv, env=env, log=log_path)

    @property
    def log(self) -> str:
        return self.log_text()

    def wait_healthy(self, deadline_s: float = 120.0) -> httpx.Response:
        """Until GET /health answers 200."""
        try:
            return self.wait_ready(f"{self.base}/health", deadline_s)
        except ChildError as exc:
            raise AssertionError(str(exc)) from None

    def wait_listening(self, deadline_s: float = 60.0) -> None:
        """Until GET /health answers at all (any status), e.g. while a model still loads."""
        try:
            self.wait_ready(f"{self.base}/health", deadline_s, ready=range(100, 600))
        except ChildError as exc:
            raise AssertionError(str(exc)) from None


class EmbedderProcess(ServiceProcess):
    """A real `python embedder/app.py` on 127.0.0.1 at a free port (the container's path)."""

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full_env = self.environment(env, self.port)
        argv = [sys.executable, str(EMBEDDER_APP)]
        super().__init__(argv, full_env, log_path, self.url, name="embedder")

    @staticmethod
    def environment(env: Mapping[str, str], port: int) -> dict[str, str]:
        """The environment of an embedder process on 127.0.0.1:`port`, `env` on top."""
        return {
            **os.environ,
            # Tests never touch the network. Settings: conftest's controlled_settings, then these.
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "EMBED_HOST": "127.0.0.1",
            "EMBED_PORT": str(port),
            "EMBED_DTYPE": "fp32",
            "EMBED_BACKEND": "torch",  # the same engine on every CPU class (tests ask for onnx)
            "EMBED_THREADS": "2",
            "LOG_LEVEL": "INFO",
            "RERANK_MODEL": "",  # no reranker unless a test asks for one
            **env,
        }


class GatedModel:
    """A copy of a model folder whose loading blocks until `open()` is called: `modules.json` is
    a named pipe, so the loader waits reading it until the test writes the real content in.
    Whatever this machine's speed, the model is loading for exactly as long as the test says."""

    def __init__(self, source: Path, folder: Path) -> None:
        folder.mkdir(parents=True)
        for item in source.iterdir():
            if item.name != "modules.json":
                (folder / item.name).symlink_to(item)
        self.content = (source / "modules.json").read_bytes()
        self.pipe = folder / "modules.json"
        os.mkfifo(self.pipe)
        self.folder = folder
        self.opened = False

    def open(self) -> None:
        """Let the load go on (blocks until the loader opens its end of the pipe)."""
        if not self.opened:
            self.opened = True
            with self.pipe.open("wb") as pipe:
                pipe.write(self.content)


@contextmanager
def serve_in_thread(app: object, deadline_s: float = 30.0, port: int = 0) -> Iterator[str]:
    """An ASGI app under a real uvicorn on loopback (on `port`, else a free one), in a thread:
    its base URL."""
    import uvicorn

    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), deadline_s, "uvicorn start")
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
