"""kb.embedding.client.EmbedClient against the real embedder, and against a scripted HTTP server
for the
answers a healthy embedder never gives (overload, broken vectors)."""

from __future__ import annotations

import base64
import json
import math
import struct
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import free_port

from kb.app.backend import embed_client
from kb.core.settings import Settings
from kb.embedding.client import EmbedClient, EmbedError

TEXTS = [f"note number {i} about {topic}" for i, topic in enumerate("abcdefghij" * 2)]


class Clock:
    """The client's `time`, except that sleeping only records the delay: retries and backoff are
    asserted on the waits the client asks for, not on how long this machine took."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(sys.modules[EmbedClient.__module__], "time", fake)
    return fake


def raw_embed(
    transport: httpx.BaseTransport, texts: list[str], input_type: str = "document"
) -> list[list[float]]:
    """The in-process embedder's vectors for `texts`, asked for without EmbedClient."""
    body = {"input": texts, "input_type": input_type}
    with httpx.Client(base_url=IN_PROCESS_EMBED_URL, transport=transport) as http:
        response = http.post("/v1/embeddings", json=body, timeout=60)
    return [d["embedding"] for d in response.json()["data"]]


def close(a: list[float], b: list[float]) -> bool:
    return all(math.isclose(x, y, abs_tol=1e-6) for x, y in zip(a, b, strict=True))


def test_defaults_come_from_settings(embedder_transport: httpx.BaseTransport) -> None:
    settings = Settings(
        _env_file=None, EMBED_URL=IN_PROCESS_EMBED_URL, EMBED_BATCH_SIZE=3, EMBED_RETRIES=1
    )
    with embed_client(settings, transport=embedder_transport) as client:
        assert (client.url, client.batch_size, client.text_chars) == (IN_PROCESS_EMBED_URL, 3, 1500)
        assert client.retries == 1
        assert client.timeout == settings.EMBED_TIMEOUT


def test_documents_come_back_in_order_in_batches_of_batch_size(
    embedder_transport: httpx.BaseTransport,
) -> None:
    with EmbedClient(IN_PROCESS_EMBED_URL, transport=embedder_transport, batch_size=4) as client:
        vectors = client.embed_documents(TEXTS)
        assert client.calls == 5  # 20 texts, 4 per request
        assert client.dimensions == 384
        assert client.model.endswith("model")
    expected = raw_embed(embedder_transport, TEXTS)
    assert all(close(v, e) for v, e in zip(vectors, expected, strict=True))


def test_requests_stay_within_the_character_budget(embedder_transport: httpx.BaseTransport) -> None:
    texts = ["x" * 15] * 6 + ["y" * 100, "z"]
    with EmbedClient(
        IN_PROCESS_EMBED_URL, transport=embedder_transport, batch_size=4, text_chars=10
    ) as client:
        vectors = client.embed_documents(texts)
        # Budget 4 x 10 = 40 chars: 15-char texts go two by two; the 100-char text goes alone.
        assert client.calls == 3 + 1 + 1
    assert len(vectors) == len(texts)


def test_query_uses_the_query_input_type(embedder_transport: httpx.BaseTransport) -> None:
    with EmbedClient(IN_PROCESS_EMBED_URL, transport=embedder_transport) as client:
        vector = client.embed_query("bread recipe")
        assert client.calls == 1
    assert close(vector, raw_embed(embedder_transport, ["bread recipe"], "query")[0])


def test_no_texts_make_no_requests(embedder_transport: httpx.BaseTransport) -> None:
    with EmbedClient(IN_PROCESS_EMBED_URL, transport=embedder_transport) as client:
        assert client.embed_documents([]) == []
        assert client.calls == 0


def test_an_empty_text_is_refused_before_sending_naming_its_index(
    embedder_transport: httpx.BaseTransport,
) -> None:
    with EmbedClient(IN_PROCESS_EMBED_URL, transport=embedder_transport) as client:
        with pytest.raises(EmbedError, match=r"texts\[2\] is empty") as caught:
            client.embed_documents(["a", "b", ""])
        assert caught.value.code == "empty_input"
        assert client.calls == 0
        with pytest.raises(EmbedError, match="query is empty"):
            client.embed_query("")


def test_server_errors_raise_embed_error_with_the_servers_message(embedder_url: str) -> None:
    # over real HTTP, from the embedder process: the one test of this client on the network
    huge = "word " * (2 * 1024 * 1024)  # 10 MiB in one text: over the server's body limit
    with EmbedClient(embedder_url, retries=3) as client:
        with pytest.raises(EmbedError) as caught:
            client.embed_documents([huge])
        assert client.calls == 1  # 413 is not retried
    assert caught.value.status == 413
    assert caught.value.code == "body_too_large"
    assert "answered 413: request body exceeds EMBED_MAX_BODY_BYTES" in caught.value.message


def test_an_unreachable_embedder_is_retried_with_backoff_then_reported(clock: Clock) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with EmbedClient(url, retries=2) as client:
        with pytest.raises(EmbedError) as caught:
            client.health()
        assert caught.value.status is None
        assert caught.value.message.startswith(f"embedder at {url} unreachable")
        with pytest.raises(EmbedError, match="unreachable") as caught:
            client.embed_documents(["a"])
        assert client.calls == 3
        assert clock.slept == [0.5, 1.0]  # exponential backoff between the three attempts
        assert caught.value.status is None


def test_waiting_for_the_embedder_ends_once_stop_is_set(clock: Clock) -> None:
    # the MCP server's watcher waits while the embedder loads: a stop must not wait it out
    stop = threading.Event()
    stop.set()
    client = EmbedClient(f"http://127.0.0.1:{free_port()}", retries=0)
    with client, pytest.raises(EmbedError, match="stopped while waiting for the embedder"):
        client.wait_ready(timeout=600, stop=stop)
    assert clock.slept == []


class Scripted:
    """A tiny HTTP server answering /health and /v1/embeddings from a script of responses."""

    def __init__(self) -> None:
        self.health: dict = {"status": "ok", "model": "scripted", "dimensions": 3}
        self.replies: list[tuple[int, dict, object]] = []  # (status, headers, json body)
        self.posts = 0
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, headers: dict, body: object) -> None:
                payload = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                self._send(200, {}, scripted.health)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                scripted.posts += 1
                self._send(*scripted.replies.pop(0))

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def vectors_body(*vectors: list[float]) -> dict:
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode(),
        }
        for i, v in enumerate(vectors)
    ]
    return {"object": "list", "data": data, "model": "scripted", "usage": {}}


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    server = Scripted()
    yield server
    server.server.shutdown()
    server.server.server_close()


def overloaded(status: int = 429, retry_after: str = "1") -> tuple[int, dict, dict]:
    error = {
        "error": {
            "message": "busy",
            "type": "overloaded_error",
            "param": None,
            "code": "queue_full",
        }
    }
    return status, {"Retry-After": retry_after}, error


def test_429_and_503_are_retried_after_the_servers_retry_after(
    scripted: Scripted, clock: Clock
) -> None:
    scripted.replies = [
        overloaded(429, "3"),
        overloaded(503, "2"),
        (200, {}, vectors_body([0.6, 0.8, 0.0])),
    ]
    with EmbedClient(scripted.url, retries=2) as client:
        assert client.embed_documents(["a"]) == [pytest.approx([0.6, 0.8, 0.0])]
        assert client.calls == 2 + 1
    assert clock.slept == [3.0, 2.0]  # what each answer's Retry-After asked, not the backoff


def test_retries_are_bounded(scripted: Scripted, clock: Clock) -> None:
    scripted.replies = [overloaded(503, "0")] * 3
    client = EmbedClient(scripted.url, retries=2)
    with client, pytest.raises(EmbedError, match="answered 503: busy") as caught:
        client.embed_documents(["a"])
    assert clock.slept == [0.0, 0.0]  # Retry-After: 0 means at once
    assert caught.value.status == 503
    assert scripted.posts == 3


def test_other_errors_are_not_retried_and_plain_bodies_are_shown(scripted: Scripted) -> None:
    scripted.replies = [(502, {}, b"bad gateway from a proxy")]
    client = EmbedClient(scripted.url, retries=5)
    with client, pytest.raises(EmbedError, match="answered 502: bad gateway from a proxy"):
        client.embed_documents(["a"])
    assert scripted.posts == 1


@pytest.mark.parametrize(
    ("vector", "problem"),
    [
        ([0.6, 0.8], "2 dimensions for input 0, expected 3"),
        ([float("nan"), 0.0, 1.0], "non-finite"),
        ([0.0, 0.0, 0.0], "zero vector"),
    ],
)
def test_every_vector_is_checked(scripted: Scripted, vector: list[float], problem: str) -> None:
    scripted.replies = [(200, {}, vectors_body(vector))]
    client = EmbedClient(scripted.url)
    with client, pytest.raises(EmbedError, match=problem):
        client.embed_query("a")


def test_a_missing_vector_is_an_error(scripted: Scripted) -> None:
    scripted.replies = [(200, {}, vectors_body([1.0, 0.0, 0.0]))]
    client = EmbedClient(scripted.url)
    with client, pytest.raises(EmbedError, match="returned 1 vectors for 2 inputs"):
        client.embed_documents(["a", "b"])


def test_a_query_repeated_within_a_minute_skips_the_embedder(
    embedder_transport: httpx.BaseTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    with EmbedClient(IN_PROCESS_EMBED_URL, transport=embedder_transport) as client:
        first = client.embed_query("how do I make kimchi?")
        calls = client.calls
        assert client.embed_query("how do I make kimchi?") == first
        assert client.calls == calls  # from memory
        client.embed_query("another question")
        assert client.calls == calls + 1
        # once the entry is older than QUERY_CACHE_S the embedder is asked again
        monkeypatch.setattr("kb.embedding.client.QUERY_CACHE_S", 0.0)
        assert client.embed_query("how do I make kimchi?") == pytest.approx(first, abs=1e-5)
        assert client.calls == calls + 2
