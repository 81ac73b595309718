"""The encoding engine and the app's failure paths, in-process with a deterministic fake encoder.

The fake turns a text into one token per character and a vector [length, first code point], so
batching, ordering and merging can be asserted exactly (the real model is tested over HTTP).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest
from starlette.testclient import TestClient

from embed_server import api as app_module
from embed_server import batching, config


class FakeEncoder:
    dimensions = 2
    name = "fake"
    matryoshka = False
    max_input_tokens = 512
    dtype = "fp32"
    device = "cpu"

    def __init__(self, fail_on: str | None = None, parallelism: int = 1) -> None:
        self.batches: list[list[int]] = []  # token lengths of every forward pass
        self.side_by_side: list[int] = []  # batches running at once, per forward pass
        self.fail_on = fail_on
        self.parallelism = parallelism

    def prompt(self, input_type: str) -> str:
        return ""

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.array([ord(c) for c in text]) for text in texts]

    def embed_ids(self, batch: Sequence[np.ndarray], side_by_side: int = 1) -> np.ndarray:
        if self.fail_on is not None and any(len(ids) == len(self.fail_on) for ids in batch):
            raise RuntimeError(f"cannot embed {self.fail_on}")
        self.batches.append([len(ids) for ids in batch])
        self.side_by_side.append(side_by_side)
        return np.array([[len(ids), ids[0]] for ids in batch], dtype=np.float32)


def expected(texts: Sequence[str]) -> np.ndarray:
    return np.array([[len(t), ord(t[0])] for t in texts], dtype=np.float32)


def test_plan_batches_sorts_longest_first_and_keeps_padded_size_under_budget() -> None:
    lengths = [5, 100, 30, 30, 7, 64, 1, 250, 12]
    batches = batching.plan_batches(lengths, batch_tokens=128)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    flat = [lengths[i] for batch in batches for i in batch]
    assert flat == sorted(lengths, reverse=True)
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) == 1 or len(batch) * longest <= 128
    assert [7] in batches  # 250 tokens exceed the budget alone: a batch of one


def test_plan_waves_puts_at_most_one_batch_per_worker_and_the_budget_in_each_wave() -> None:
    rng = random.Random(3)
    lengths = [rng.randint(1, 300) for _ in range(200)] + [900, 1000]
    waves = batching.plan_waves(lengths, batch_tokens=1024, workers=4)
    batches = [batch for wave in waves for batch in wave]
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert [lengths[i] for batch in batches for i in batch] == sorted(lengths, reverse=True)
    for wave in waves:
        costs = [len(batch) * lengths[batch[0]] for batch in wave]
        assert len(wave) <= 4
        assert all(
            cost <= 1024 // 4 or len(batch) == 1 for cost, batch in zip(costs, wave, strict=True)
        )
        assert sum(costs) <= 1024 or len(wave) == 1
    # The two longest inputs exceed a wave's budget together: each runs alone.
    assert waves[0] == [[len(lengths) - 1]] and waves[1] == [[len(lengths) - 2]]


def test_micro_batches_of_a_wave_run_side_by_side_and_know_it() -> None:
    class PairedEncoder(FakeEncoder):
        """Batches of a two-batch wave both wait here: it only passes if they run at once."""

        def __init__(self) -> None:
            super().__init__(parallelism=2)
            self.barrier = threading.Barrier(2, timeout=10)

        def embed_ids(self, batch: Sequence[np.ndarray], side_by_side: int = 1) -> np.ndarray:
            if side_by_side == 2:
                self.barrier.wait()
            return super().embed_ids(batch, side_by_side)

    encoder = PairedEncoder()
    # Budget 20 over 2 workers: batches of <= 10 padded tokens, waves of <= 20 in all.
    engine = batching.Engine(encoder, batch_tokens=20, queue_size=4, max_round_inputs=100)
    texts = ["aaaaaaaaaa", "bbbbbbbbb", "cccc", "ddd"]
    engine.start()
    try:
        result = engine.submit(texts).result(timeout=30)
    finally:
        engine.stop()
    np.testing.assert_array_equal(result.vectors, expected(texts))
    # Waves: [10] and [9] side by side (sharing the threads), then [4, 3] alone.
    assert sorted(encoder.batches[:2]) == [[9], [10]] and encoder.side_by_side[:2] == [2, 2]
    assert encoder.batches[2:] == [[4, 3]] and encoder.side_by_side[2:] == [1]


def test_a_failing_batch_fails_its_round_while_side_by_side_and_the_engine_keeps_serving() -> None:
    engine = batching.Engine(
        FakeEncoder(fail_on="boom!", parallelism=2),
        batch_tokens=20,
        queue_size=4,
        max_round_inputs=10,
    )
    engine.start()
    try:
        with pytest.raises(RuntimeError):
            engine.submit(["boom!", "fine text", "other"]).result(timeout=10)
        good = engine.submit(["fine", "also fine"]).result(timeout=10)
        np.testing.assert_array_equal(good.vectors, expected(["fine", "also fine"]))
    finally:
        engine.stop()


def test_one_big_request_needs_no_more_forward_passes_or_padding_than_small_requests() -> None:
    rng = random.Random(5)
    texts = ["x" * rng.randint(50, 400) for _ in range(64)]

    def cost(requests: list[list[str]]) -> tuple[int, int]:
        encoder = FakeEncoder(parallelism=2)
        engine = batching.Engine(encoder, batch_tokens=2048, queue_size=4, max_round_inputs=100)
        engine.start()
        try:
            for request in requests:  # one after another, as the client sends them
                engine.submit(request).result(timeout=10)
        finally:
            engine.stop()
        return len(encoder.batches), sum(len(b) * max(b) for b in encoder.batches)

    big_passes, big_padded = cost([texts])
    for size in (16, 4):
        passes, padded = cost([texts[i : i + size] for i in range(0, len(texts), size)])
        assert big_passes <= passes and big_padded <= padded


def test_requests_waiting_together_are_encoded_in_one_round_in_input_order() -> None:
    encoder = FakeEncoder()
    engine = batching.Engine(encoder, batch_tokens=40, queue_size=8, max_round_inputs=100)
    jobs = [["ccc", "a", "bbbbbbbbbb"], ["zz"], ["yyyyyyyyyyyyyyyyyyyy", "x"]]
    futures = [engine.submit(texts) for texts in jobs]  # queued before the worker starts
    engine.start()
    try:
        for texts, future in zip(jobs, futures, strict=True):
            result = future.result(timeout=10)
            np.testing.assert_array_equal(result.vectors, expected(texts))
            assert result.token_counts == [len(t) for t in texts]
    finally:
        engine.stop()
    assert engine.rounds == 1
    assert encoder.batches == [[20, 10], [3, 2, 1, 1]]  # sorted, each under 40 padded tokens


def test_a_round_stops_taking_requests_at_the_input_limit() -> None:
    encoder = FakeEncoder()
    engine = batching.Engine(encoder, batch_tokens=1000, queue_size=8, max_round_inputs=3)
    futures = [engine.submit(["aa", "b"]) for _ in range(4)]
    engine.start()
    try:
        for future in futures:
            future.result(timeout=10)
    finally:
        engine.stop()
    assert engine.rounds == 2  # 2 + 2 inputs reach the limit of 3, then the other two


def test_a_full_queue_refuses_new_requests_at_once() -> None:
    engine = batching.Engine(FakeEncoder(), batch_tokens=100, queue_size=2, max_round_inputs=10)
    engine.submit(["a"])
    engine.submit(["b"])
    with pytest.raises(batching.QueueFull):
        engine.submit(["c"])


def test_cancelled_requests_are_not_encoded() -> None:
    encoder = FakeEncoder()
    engine = batching.Engine(encoder, batch_tokens=100, queue_size=4, max_round_inputs=10)
    gone = engine.submit(["abandoned request"])
    kept = engine.submit(["kept"])
    assert gone.cancel()
    engine.start()
    try:
        np.testing.assert_array_equal(kept.result(timeout=10).vectors, expected(["kept"]))
    finally:
        engine.stop()
    assert encoder.batches == [[4]]


def test_an_encoder_failure_fails_that_round_and_the_engine_keeps_serving() -> None:
    engine = batching.Engine(
        FakeEncoder(fail_on="boom!"), batch_tokens=100, queue_size=4, max_round_inputs=10
    )
    bad = engine.submit(["boom!"])
    engine.start()
    try:
        with pytest.raises(RuntimeError):
            bad.result(timeout=10)
        good = engine.submit(["fine"]).result(timeout=10)
        np.testing.assert_array_equal(good.vectors, expected(["fine"]))
    finally:
        engine.stop()


LOCAL = "http://localhost:8080"  # a Host the app answers (EMBED_PORT's default), not testserver


def _settings(**overrides: object):
    return config.EmbedderSettings(_env_file=None, EMBED_MODEL="fake", **overrides)


def _ready(client: TestClient) -> None:
    end = time.monotonic() + 10
    while client.get("/health").status_code != 200:
        assert time.monotonic() < end, client.get("/health").text
        time.sleep(0.01)


def test_unexpected_errors_answer_a_sanitised_500_and_log_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "private words from a note"
    app = app_module.create_app(_settings(), loader=lambda _: FakeEncoder(fail_on=secret))
    with (
        TestClient(app, base_url=LOCAL) as client,
        caplog.at_level(logging.ERROR, logger="embedder"),
    ):
        _ready(client)
        response = client.post("/v1/embeddings", json={"input": ["ok", secret]})
        assert response.status_code == 500
        assert response.json() == {
            "error": {
                "message": "internal error; see the embedder log",
                "type": "server_error",
                "param": None,
                "code": "internal_error",
            }
        }
        assert secret not in response.text
        assert client.post("/v1/embeddings", json={"input": "ok"}).status_code == 200
    failure = next(r for r in caplog.records if r.getMessage() == "embedding 2 inputs failed")
    assert failure.exc_info is not None


def test_an_unexpected_load_error_is_reported_without_its_text() -> None:
    def broken_loader(_: object) -> FakeEncoder:
        raise RuntimeError("path /home/someone/secret")

    app = app_module.create_app(_settings(), loader=broken_loader)
    with TestClient(app, base_url=LOCAL) as client:
        end = time.monotonic() + 10
        while (response := client.get("/health")).status_code == 503:
            assert time.monotonic() < end
            time.sleep(0.01)
        assert response.status_code == 500
        error = response.json()["error"]
        assert error["code"] == "model_load_failed"
        assert error["message"] == "model failed to load (RuntimeError); see the embedder log"
