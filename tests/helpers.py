"""Small helpers shared by tests: free ports, polling with a deadline, embedder processes, a model
whose loading waits for the test, apps served in a thread."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent
EMBEDDER_APP = REPO_ROOT / "embedder" / "app.py"


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


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


class ServiceProcess:
    """A real service process started from the repository root, its output in `log_path` so a
    failing test can show it; `stop()` terminates it (then kills it if it hangs)."""

    def __init__(
        self, argv: Sequence[str], env: Mapping[str, str], log_path: Path, base: str
    ) -> None:
        self.base = base  # http://127.0.0.1:PORT
        self.env = dict(env)
        self.log_path = log_path
        self._log = log_path.open("wb")
        # cwd = repository root: the images' WORKDIR /app holds the same relative layout
        self.proc = subprocess.Popen(
            list(argv), cwd=REPO_ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT
        )

    @property
    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def log_tail(self, chars: int = 4000) -> str:
        return self.log[-chars:]

    def wait_healthy(self, deadline_s: float = 120.0) -> httpx.Response:
        """Until GET /health answers 200."""
        try:
            return wait_http(f"{self.base}/health", deadline_s, proc=self.proc)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- log ---\n{self.log_tail()}") from None

    def wait_listening(self, deadline_s: float = 60.0) -> None:
        """Until GET /health answers at all (any status), e.g. while a model still loads."""
        end = time.monotonic() + deadline_s
        with httpx.Client(timeout=10.0) as client:
            while True:
                if self.proc.poll() is not None:
                    raise AssertionError(f"exited with {self.proc.returncode}:\n{self.log_tail()}")
                try:
                    client.get(f"{self.base}/health")
                    return
                except httpx.TransportError:
                    pass
                if time.monotonic() > end:
                    raise AssertionError(f"not listening after {deadline_s}s:\n{self.log_tail()}")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self._log.close()


class EmbedderProcess(ServiceProcess):
    """A real `python embedder/app.py` on 127.0.0.1 at a free port (the container's path)."""

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full_env = self.environment(env, self.port)
        super().__init__([sys.executable, str(EMBEDDER_APP)], full_env, log_path, self.url)

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
