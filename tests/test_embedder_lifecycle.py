"""Model-loading state, load failures and overload, on real embedder processes.

Loading is made observably slow for real: the model folder's `modules.json` is a named pipe, so
the loader blocks reading it until the test writes the real file's content into the pipe.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from conftest import EmbedderFactory
from helpers import EmbedderProcess

from kb.embedding import EmbedClient, EmbedError


class GatedModel:
    """A copy of a model folder whose loading blocks until `open()` is called."""

    def __init__(self, source: Path, folder: Path) -> None:
        folder.mkdir()
        for item in source.iterdir():
            if item.name != "modules.json":
                (folder / item.name).symlink_to(item)
        self.content = (source / "modules.json").read_bytes()
        self.pipe = folder / "modules.json"
        os.mkfifo(self.pipe)
        self.folder = folder
        self._opened = False

    def open(self) -> None:
        if not self._opened:
            self._opened = True
            with self.pipe.open("wb") as pipe:  # blocks until the loader opens its end
                pipe.write(self.content)


def wait_until(condition, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, "condition not met before the deadline"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def gated(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory):
    gate = GatedModel(minilm_path, tmp_path_factory.mktemp("gated") / "minilm")
    yield gate
    if not gate._opened:  # never leave a loader thread blocked on the pipe
        threading.Thread(target=gate.open, daemon=True).start()


@pytest.fixture(scope="module")
def gated_server(start_embedder: EmbedderFactory, gated: GatedModel) -> EmbedderProcess:
    server = start_embedder(
        {
            "EMBED_MODEL": str(gated.folder),
            "EMBED_QUEUE_SIZE": "1",
            "EMBED_THREADS": "1",
        },
        wait=False,
    )
    server.wait_listening()
    return server


def test_health_is_503_with_retry_after_while_the_model_loads(gated_server) -> None:
    response = httpx.get(f"{gated_server.url}/health")
    assert response.status_code == 503
    assert int(response.headers["retry-after"]) >= 1
    assert response.json()["error"]["code"] == "model_loading"

    embed = httpx.post(f"{gated_server.url}/v1/embeddings", json={"input": "a"})
    assert embed.status_code == 503
    assert "retry-after" in embed.headers
    assert embed.json()["error"]["type"] == "service_unavailable"


def test_client_health_raises_503_while_loading(gated_server) -> None:
    with EmbedClient(gated_server.url, retries=0) as client:
        with pytest.raises(EmbedError) as caught:
            client.health()
        assert caught.value.status == 503
        assert caught.value.code == "model_loading"
        assert "loading" in caught.value.message
        with pytest.raises(EmbedError, match="not ready after 0s"):
            client.wait_ready(timeout=0.0)


def test_client_retries_through_loading_then_health_turns_200(gated_server, gated) -> None:
    with EmbedClient(gated_server.url, retries=30) as client:
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(client.embed_documents, ["first note", "second note"])
            # A second attempt means the first was refused: the model cannot load yet.
            wait_until(lambda: client.calls >= 2)
            assert not pending.done()
            gated.open()
            vectors = pending.result(timeout=120)
        assert [len(v) for v in vectors] == [384, 384]
    body = httpx.get(f"{gated_server.url}/health").json()
    assert body["status"] == "ok"
    assert body["dimensions"] == 384


def test_requests_over_the_queue_limit_get_429_quickly(gated_server, gated) -> None:
    gated.open()
    gated_server.wait_healthy()
    # Each request takes ~1 s to encode on one thread; with one queue slot, of six requests sent
    # together at most one is encoding and one waiting: the others are turned away at once.
    body = {"input": ["boundary layer flow " * 80] * 16}

    def send(_: int) -> tuple[httpx.Response, float]:
        started = time.monotonic()
        response = httpx.post(f"{gated_server.url}/v1/embeddings", json=body, timeout=120.0)
        return response, time.monotonic() - started

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(send, range(6)))
    statuses = sorted(r.status_code for r, _ in results)
    assert statuses.count(200) >= 1
    assert statuses.count(429) >= 3
    assert set(statuses) <= {200, 429}
    slowest_success = max(elapsed for r, elapsed in results if r.status_code == 200)
    for response, elapsed in results:
        if response.status_code == 429:
            assert response.headers["retry-after"] == "1"
            assert response.json()["error"]["code"] == "queue_full"
            assert elapsed < slowest_success  # turned away, not made to wait for the model


def test_a_model_that_cannot_load_is_reported_on_health_and_requests(
    start_embedder: EmbedderFactory, tmp_path: Path
) -> None:
    server = start_embedder(
        {"EMBED_MODEL": "someone/not-downloaded-model", "HF_HOME": str(tmp_path / "hf")},
        wait=False,
    )
    server.wait_listening()

    def failed() -> bool:
        return httpx.get(f"{server.url}/health").status_code == 500

    wait_until(failed)
    error = httpx.get(f"{server.url}/health").json()["error"]
    assert error["code"] == "model_load_failed"
    assert (
        "'someone/not-downloaded-model' is not a folder and not in the Hugging Face cache"
        in (error["message"])
    )
    response = httpx.post(f"{server.url}/v1/embeddings", json={"input": "a"})
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "model_load_failed"
    with EmbedClient(server.url, retries=3) as client:
        started = time.monotonic()
        with pytest.raises(EmbedError, match="not in the Hugging Face cache") as caught:
            client.wait_ready(timeout=60)
        assert caught.value.status == 500
        assert time.monotonic() - started < 5  # a failed load does not recover: no waiting
    assert server.proc.poll() is None  # it stays up to tell clients why


def test_invalid_settings_exit_with_one_error_line(
    start_embedder: EmbedderFactory,
) -> None:
    server = start_embedder({"EMBED_DTYPE": "fp8"}, wait=False)
    assert server.proc.wait(timeout=60) == 2
    log = server.log_tail()
    assert log.startswith("error: embedder settings:")
    assert "EMBED_DTYPE" in log
    assert len(log.strip().splitlines()) == 1
