"""Model-loading state, load failures and overload, on real embedder processes.

Loading is held back for real (helpers.GatedModel: the loader waits on a named pipe until the
test lets it go on), and encoding is held in the overload test, so every test asserts on states
and the order of events, never on how fast this machine is. Each test owns the server whose state
it asserts on: they pass in any order.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from conftest import EmbedderFactory
from helpers import (
    EmbedderProcess,
    GatedModel,
    free_port,
    serve_in_thread,
    torch_threads_kept,
    wait_until,
)

from kb.embedding.client import EmbedClient, EmbedError


@pytest.fixture(scope="module")
def loading_server(
    start_embedder: EmbedderFactory, minilm_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbedderProcess]:
    """An embedder whose model stays loading for as long as this module runs (no test here lets
    it go on), shared by the tests that only look at that state."""
    gate = GatedModel(minilm_path, tmp_path_factory.mktemp("loading") / "minilm")
    server = start_embedder({"EMBED_MODEL": str(gate.folder)}, wait=False)
    server.wait_listening()
    yield server
    server.stop()  # its loader is still waiting on the pipe: stop it rather than let it load


def test_health_is_503_with_retry_after_while_the_model_loads(loading_server) -> None:
    response = httpx.get(f"{loading_server.url}/health")
    assert response.status_code == 503
    assert int(response.headers["retry-after"]) >= 1
    assert response.json()["error"]["code"] == "model_loading"

    embed = httpx.post(f"{loading_server.url}/v1/embeddings", json={"input": "a"})
    assert embed.status_code == 503
    assert "retry-after" in embed.headers
    assert embed.json()["error"]["type"] == "service_unavailable"


def test_client_health_raises_503_while_loading(loading_server) -> None:
    with EmbedClient(loading_server.url, retries=0) as client:
        with pytest.raises(EmbedError) as caught:
            client.health()
        assert caught.value.status == 503
        assert caught.value.code == "model_loading"
        assert "loading" in caught.value.message
        with pytest.raises(EmbedError, match="not ready after 0s"):
            client.wait_ready(timeout=0.0)


def test_client_retries_through_loading_then_health_turns_200(
    start_embedder: EmbedderFactory, minilm_path: Path, tmp_path: Path
) -> None:
    gate = GatedModel(minilm_path, tmp_path / "minilm")
    server = start_embedder({"EMBED_MODEL": str(gate.folder)}, wait=False)
    try:
        server.wait_listening()
        with EmbedClient(server.url, retries=30) as client:
            with ThreadPoolExecutor(max_workers=1) as pool:
                pending = pool.submit(client.embed_documents, ["first note", "second note"])
                # A second attempt means the first was refused: the model cannot load yet.
                wait_until(lambda: client.calls >= 2 or pending.done(), what="a retry")
                assert not pending.done(), pending.result()
                gate.open()
                vectors = pending.result(timeout=120)
            assert [len(v) for v in vectors] == [384, 384]
        body = httpx.get(f"{server.url}/health").json()
        assert body["status"] == "ok"
        assert body["dimensions"] == 384
    finally:
        server.stop()


class HeldEncoder:
    """The real MiniLM encoder, except that encoding waits until `release()`: a forward pass
    as long as the test needs, on a machine of any speed."""

    def __init__(self, encoder: object) -> None:
        self.encoder = encoder
        self.encoding = threading.Event()
        self._released = threading.Event()

    def __getattr__(self, name: str) -> object:  # dimensions, tokenize, prompt ...
        return getattr(self.encoder, name)

    def embed_ids(self, batch: Sequence[np.ndarray], side_by_side: int = 1) -> np.ndarray:
        self.encoding.set()
        assert self._released.wait(120), "never released"
        return self.encoder.embed_ids(batch, side_by_side)

    def release(self) -> None:
        self._released.set()


def test_requests_over_the_queue_limit_get_429_at_once_while_the_model_works(
    minilm_path: Path,
) -> None:
    from embed_server import api as app
    from embed_server import config, model

    port = free_port()  # the app's own port: its Host check answers requests there only
    settings = config.EmbedderSettings(
        _env_file=None, EMBED_MODEL=str(minilm_path), EMBED_QUEUE_SIZE=1, EMBED_THREADS=1,
        EMBED_PORT=port, EMBED_DTYPE="fp32",
    )  # fmt: skip
    held: list[HeldEncoder] = []

    def load(settings: object) -> HeldEncoder:
        held.append(HeldEncoder(model.Embedder(settings)))
        return held[0]

    def send(url: str) -> httpx.Response:
        return httpx.post(f"{url}/v1/embeddings", json={"input": ["a", "b"]}, timeout=120)

    with (
        torch_threads_kept(),
        serve_in_thread(app.create_app(settings, loader=load), port=port) as url,
        ThreadPoolExecutor(max_workers=6) as pool,
    ):
        wait_until(lambda: httpx.get(f"{url}/health").status_code == 200, what="model loaded")
        [encoder] = held
        encoding = pool.submit(send, url)
        wait_until(encoder.encoding.is_set, what="the first request encoding")
        # One request is encoding; of five more, one takes the only queue slot and the others
        # are turned away while the model is still busy (it is held until release()).
        later = [pool.submit(send, url) for _ in range(5)]
        wait_until(lambda: sum(f.done() for f in later) >= 4, what="four answers")
        [queued] = [f for f in later if not f.done()]
        assert not encoding.done()
        for response in (f.result() for f in later if f is not queued):
            assert response.status_code == 429, response.text
            assert response.headers["retry-after"] == "1"
            assert response.json()["error"]["code"] == "queue_full"
        encoder.release()
        assert encoding.result(timeout=120).status_code == 200
        assert queued.result(timeout=120).status_code == 200


def test_a_model_that_cannot_load_is_reported_on_health_and_requests(
    start_embedder: EmbedderFactory, tmp_path: Path
) -> None:
    server = start_embedder(
        {
            "EMBED_MODEL": "someone/not-downloaded-model",
            "HF_HOME": str(tmp_path / "hf"),
            "LOG_LEVEL": "DEBUG",  # a line per request (the health polls counted below)
        },
        wait=False,
    )
    server.wait_listening()

    wait_until(lambda: httpx.get(f"{server.url}/health").status_code == 500, what="load failed")
    error = httpx.get(f"{server.url}/health").json()["error"]
    assert error["code"] == "model_load_failed"
    assert error["message"].startswith(
        "EMBED_MODEL someone/not-downloaded-model is not in the Hugging Face cache: fetch it "
        "with `uvx --from huggingface-hub hf download someone/not-downloaded-model`"
    )
    response = httpx.post(f"{server.url}/v1/embeddings", json={"input": "a"})
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "model_load_failed"
    health_checks = server.log.count('"GET /health HTTP/1.1" 500')
    with EmbedClient(server.url, retries=3) as client:
        with pytest.raises(EmbedError, match="not in the Hugging Face cache") as caught:
            client.wait_ready(timeout=600)
        assert caught.value.status == 500
    # a failed load does not recover: the first answer ends the wait, nothing is polled again
    assert server.log.count('"GET /health HTTP/1.1" 500') == health_checks + 1
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
