"""EMBED_BACKEND=auto, EMBED_DTYPE=auto: the embedder measures its engines and says why on /health.

Two kinds of engine: in-process fakes whose speed and accuracy are fixed (each forward pass moves
a fake clock by its cost, each vector is fp32's turned by a fixed angle), so that the choice is
known in advance; and the real tiny Qwen3 fixture through the real Embedder, where the figures are
whatever this machine measures and the test checks that the choice follows them.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch
from helpers import free_port, serve_in_thread, torch_threads_kept, wait_until

from embed_server import api, autotune, autotune_measure, config, errors, hardware, model

DIMS = 16


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


# engine -> (seconds per 1,000 padded tokens, lowest cosine its vectors keep to fp32's, MB)
ENGINES = {
    "torch fp32": (4.0, 1.0, 100.0),
    "torch int8": (1.0, 0.98, 30.0),  # the fastest, but outside the bound
    "torch bf16": (2.0, 0.9999, 50.0),
}


def fp32_vector(ids: np.ndarray) -> np.ndarray:
    """A unit vector that depends only on the token ids (fp32's answer)."""
    seed = int.from_bytes(ids.astype(np.int64).tobytes()[:64].ljust(8, b"\0")[:8], "little")
    vector = np.random.default_rng(seed + len(ids)).standard_normal(DIMS)
    return vector / np.linalg.norm(vector)


def turned(vector: np.ndarray, cosine: float) -> np.ndarray:
    """`vector` turned by a fixed angle: exactly `cosine` to it."""
    other = np.roll(vector, 1) - vector * float(np.roll(vector, 1) @ vector)
    other /= np.linalg.norm(other)
    return cosine * vector + np.sqrt(max(0.0, 1 - cosine**2)) * other


class FakeEmbedder:
    """model.Embedder's surface as autotune and the service use it, with engines of fixed cost.

    Tokens: one per character. Every forward pass advances `clock` by the engine's cost for its
    padded tokens; `gate`, when set, holds every forward pass until the test opens it."""

    _ENGINE = ("backend", "dtype")  # what one loaded engine is, as model.Embedder names it

    def __init__(
        self,
        settings: config.EmbedderSettings,
        clock: FakeClock,
        engines: dict[str, tuple[float, float, float]] = ENGINES,
        gate: threading.Event | None = None,
    ) -> None:
        self.settings = settings
        self.name = settings.EMBED_MODEL
        self.folder = Path(settings.EMBED_MODEL)
        self.threads = settings.EMBED_THREADS
        self.device = torch.device("cpu")
        self.dimensions = DIMS
        self.max_input_tokens = 512
        self.matryoshka = False
        self.clock = clock
        self.engines = engines
        self.gate = gate
        self.loads: list[str] = []
        self.embedded: list[tuple[str, int]] = []  # (engine, inputs) per forward pass
        self.decision: dict[str, Any] | None = None
        self.query_encoder: FakeEmbedder | None = None
        self.calibration = None
        self.backend = self.dtype = ""
        self.parallelism = 1
        self.reuse_instruction = True
        autotune.decide(self)  # type: ignore[arg-type]

    @property
    def engine(self) -> str:
        return f"{self.backend} {self.dtype}"

    def load_engine(self, backend: str, dtype: str) -> None:
        self.backend, self.dtype = backend, dtype
        self.loads.append(self.engine)

    def quantize_in_place(self) -> None:
        self.load_engine("torch", "int8")

    def detach_engine(self) -> dict[str, Any]:
        return {"backend": self.backend, "dtype": self.dtype}

    def attach_engine(self, state: dict[str, Any]) -> None:
        self.backend, self.dtype = state["backend"], state["dtype"]

    def size_bytes(self) -> int:
        return int(self.engines[self.engine][2] * 2**20)

    def prompt(self, input_type: str) -> str:
        return "query: " if input_type == "query" else ""

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.frombuffer(t.encode()[:512], dtype=np.uint8).astype(np.int64) for t in texts]

    def embed_ids(self, batch: Sequence[np.ndarray], side_by_side: int = 1) -> np.ndarray:
        if self.gate is not None:
            assert self.gate.wait(60), "the test never opened the gate"
        cost, cosine, _ = self.engines[self.engine]
        self.clock.advance(cost * len(batch) * max(len(ids) for ids in batch) / 1000)
        self.embedded.append((self.engine, len(batch)))
        return np.stack([turned(fp32_vector(ids), cosine) for ids in batch]).astype(np.float32)


def settings(folder: Path, state: Path, **values: Any) -> config.EmbedderSettings:
    values = {"EMBED_THREADS": 2, **values}
    return config.EmbedderSettings(
        _env_file=None, EMBED_MODEL=str(folder), EMBED_STATE_DIR=str(state), **values
    )


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeClock:
    """The fake engines are auto's candidates, timed on a fake clock; a model folder of one file."""
    clock = FakeClock()
    monkeypatch.setattr(autotune_measure, "clock", clock)
    monkeypatch.setattr(
        autotune, "candidates", lambda e: [tuple(name.split()) for name in e.engines]
    )
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    return clock


def test_auto_runs_the_fastest_engine_that_keeps_the_bound_and_health_says_why(
    fakes: FakeClock, tmp_path: Path
) -> None:
    port = free_port()
    values = settings(tmp_path / "model", tmp_path / "state", EMBED_PORT=port)
    app = api.create_app(values, loader=lambda s: FakeEmbedder(s, fakes))  # type: ignore[arg-type,return-value]
    with serve_in_thread(app, port=port) as url:
        wait_until(lambda: httpx.get(f"{url}/health").status_code == 200, what="decided")
        health = httpx.get(f"{url}/health").json()
    assert (health["backend"], health["dtype"]) == ("torch", "bf16")
    auto = health["auto"]
    assert (auto["measured"], auto["cached"]) == (True, False)
    assert auto["documents"] == auto["queries"] == "torch bf16"
    figures = {c["engine"]: c for c in auto["candidates"]}
    assert list(figures) == ["torch fp32", "torch int8", "torch bf16"]
    # fp32 the reference; int8 faster but outside the bound, so never timed; bf16 at its cost
    assert figures["torch fp32"]["min_cosine"] == pytest.approx(1.0)
    assert figures["torch int8"]["min_cosine"] == pytest.approx(0.98, abs=1e-4)
    assert figures["torch int8"]["document_batch_s"] is None
    assert "below 0.995" in figures["torch int8"]["note"]
    pair = 2 * autotune.DOC_TOKENS / 1000  # two micro-batches of DOC_TOKENS
    assert figures["torch bf16"]["document_batch_s"] == pytest.approx(2.0 * pair)
    assert figures["torch fp32"]["document_batch_s"] == pytest.approx(4.0 * pair)
    query = autotune.QUERY_TOKENS / 1000
    assert figures["torch bf16"]["query_s"] == pytest.approx(2.0 * query)
    assert "fastest within lowest cosine >= 0.995" in auto["reason"]
    assert "2.00x torch fp32" in auto["reason"]
    assert health["query_engine"] == {
        "backend": "torch",
        "dtype": "bf16",
        "instruction_tokens_reused": 0,
        "threads": None,  # a fake engine: no torch passes
    }


def test_health_is_503_while_auto_measures_and_200_once_it_has_decided(
    fakes: FakeClock, tmp_path: Path
) -> None:
    gate = threading.Event()
    port = free_port()
    values = settings(tmp_path / "model", tmp_path / "state", EMBED_PORT=port)
    app = api.create_app(values, loader=lambda s: FakeEmbedder(s, fakes, gate=gate))  # type: ignore[arg-type,return-value]
    with serve_in_thread(app, port=port) as url:
        try:
            answer = httpx.get(f"{url}/health")
            assert answer.status_code == 503  # the first forward pass is held: still measuring
            assert answer.json()["error"]["code"] == "model_loading"
            assert answer.headers["retry-after"] == "2"
        finally:
            gate.set()
        wait_until(lambda: httpx.get(f"{url}/health").status_code == 200, what="decided")
        assert httpx.get(f"{url}/health").json()["auto"]["documents"] == "torch bf16"


def test_a_kept_decision_is_reused_without_measuring(fakes: FakeClock, tmp_path: Path) -> None:
    values = settings(tmp_path / "model", tmp_path / "state")
    first = FakeEmbedder(values, fakes)
    [kept] = (tmp_path / "state").glob("auto-engine-*.json")
    assert json.loads(kept.read_text())["documents"] == "torch bf16"
    again = FakeEmbedder(values, fakes)
    assert again.loads == ["torch bf16"]  # loaded directly: nothing measured
    assert again.embedded == []
    assert again.decision is not None and first.decision is not None
    assert again.decision["cached"] is True
    assert again.decision["candidates"] == first.decision["candidates"]
    assert again.decision["cache_file"] == str(kept)


@pytest.mark.parametrize("change", ["threads", "model file", "library version", "candidates"])
def test_a_kept_decision_is_measured_again_when_what_it_depends_on_changes(
    fakes: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    values = settings(tmp_path / "model", tmp_path / "state")
    FakeEmbedder(values, fakes)
    engines = ENGINES
    if change == "threads":
        values = settings(tmp_path / "model", tmp_path / "state", EMBED_THREADS=1)
    elif change == "model file":
        (tmp_path / "model" / "config.json").write_text('{"hidden_size": 8}')
    elif change == "library version":
        versions = autotune.library_versions()
        monkeypatch.setattr(autotune, "library_versions", lambda: {**versions, "torch": "9.9"})
    else:
        engines = {**ENGINES, "onnx fp32": (3.0, 1.0, 100.0)}
    again = FakeEmbedder(values, fakes, engines)
    assert again.decision is not None and again.decision["cached"] is False
    assert again.loads[0] == "torch fp32"  # measured again, from the reference on
    assert len(list((tmp_path / "state").glob("auto-engine-*.json"))) == 2


def test_an_unreadable_kept_decision_is_measured_again_and_replaced(
    fakes: FakeClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    values = settings(tmp_path / "model", tmp_path / "state")
    FakeEmbedder(values, fakes)
    [kept] = (tmp_path / "state").glob("auto-engine-*.json")
    kept.write_text("{not json")
    with caplog.at_level(logging.WARNING):
        again = FakeEmbedder(values, fakes)
    assert again.decision is not None and again.decision["cached"] is False
    assert "unreadable decision" in caplog.text
    assert json.loads(kept.read_text())["documents"] == "torch bf16"


def test_an_unwritable_state_folder_still_serves_and_says_the_next_start_measures_again(
    fakes: FakeClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the state folder should be")
    with caplog.at_level(logging.WARNING):
        embedder = FakeEmbedder(settings(tmp_path / "model", blocker / "state"), fakes)
    assert embedder.engine == "torch bf16"
    assert embedder.decision is not None and embedder.decision["cache_file"] is None
    assert "the next start measures again" in caplog.text and "EMBED_STATE_DIR" in caplog.text


# documents fastest on bf16; queries fastest on an accurate int8, which is loaded beside it
SPLIT = {
    "torch fp32": (4.0, 1.0, 100.0),
    "torch bf16": (2.0, 0.9999, 50.0),
    "torch int8": (2.5, 0.999, 30.0),
}


def test_queries_run_on_their_own_fastest_engine_when_it_is_much_faster_and_memory_allows(
    fakes: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # int8 is slower per document batch (2.5 vs 2.0) but the same per token: make its queries
    # faster by giving queries a cost of their own
    def query_cost(self: FakeEmbedder, batch: Sequence[np.ndarray], side: int = 1) -> np.ndarray:
        if self.engine == "torch int8" and len(batch) == 1 and len(batch[0]) <= 20:
            self.clock.advance(-0.04)  # 0.05 s - 0.04 s = 0.01 s per query
        return original(self, batch, side)

    original = FakeEmbedder.embed_ids
    monkeypatch.setattr(FakeEmbedder, "embed_ids", query_cost)
    port = free_port()
    values = settings(tmp_path / "model", tmp_path / "state", EMBED_PORT=port)
    loaded: list[FakeEmbedder] = []

    def load(s: config.EmbedderSettings) -> FakeEmbedder:
        loaded.append(FakeEmbedder(s, fakes, SPLIT))
        return loaded[-1]

    app = api.create_app(values, loader=load)  # type: ignore[arg-type]
    with serve_in_thread(app, port=port) as url:
        wait_until(lambda: httpx.get(f"{url}/health").status_code == 200, what="decided")
        health = httpx.get(f"{url}/health").json()
        [embedder] = loaded
        second = embedder.query_encoder
        assert second is not None
        second.embedded, embedder.embedded = [], []  # copies of one object share the list
        body = {"input": "when is the release", "input_type": "query"}
        assert httpx.post(f"{url}/v1/embeddings", json=body).status_code == 200
        assert httpx.post(f"{url}/v1/embeddings", json={"input": "a note"}).status_code == 200
    assert (health["backend"], health["dtype"]) == ("torch", "bf16")
    assert health["query_engine"] == {
        "backend": "torch",
        "dtype": "int8",
        "instruction_tokens_reused": 0,
        "threads": None,  # a fake engine: no torch passes
    }
    assert health["auto"]["queries"] == "torch int8"
    assert "loaded beside it for queries (+30 MB)" in health["auto"]["reason"]
    assert second.embedded == [("torch int8", 1)]  # the query
    assert embedder.embedded == [("torch bf16", 1)]  # the document


def test_queries_stay_on_the_documents_engine_when_the_memory_is_not_free(
    fakes: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(autotune, "available_bytes", lambda: 100 * 2**20)
    engines = {**SPLIT, "torch int8": (0.5, 0.999, 300.0)}
    engines["torch bf16"] = (0.4, 0.9999, 50.0)

    def query_cost(self: FakeEmbedder, batch: Sequence[np.ndarray], side: int = 1) -> np.ndarray:
        if self.engine == "torch int8" and len(batch) == 1 and len(batch[0]) <= 20:
            self.clock.advance(-0.009)  # 0.01 s - 0.009 s per query: int8 answers queries first
        return original(self, batch, side)

    original = FakeEmbedder.embed_ids
    monkeypatch.setattr(FakeEmbedder, "embed_ids", query_cost)
    embedder = FakeEmbedder(settings(tmp_path / "model", tmp_path / "state"), fakes, engines)
    assert embedder.query_encoder is None
    assert embedder.decision is not None
    assert embedder.decision["fastest_for_queries"] == "torch int8"
    assert embedder.decision["queries"] == "torch bf16"
    assert (
        "would need" in embedder.decision["reason"] and "MB is free" in embedder.decision["reason"]
    )


def test_auto_on_the_real_qwen3_shape_reports_each_engine_and_runs_the_fastest_within_the_bound(
    tiny_qwen3_path: Path, tmp_path: Path
) -> None:
    port = free_port()
    values = settings(tiny_qwen3_path, tmp_path / "state", EMBED_PORT=port)
    with torch_threads_kept(), serve_in_thread(api.create_app(values), port=port) as url:
        wait_until(lambda: httpx.get(f"{url}/health").status_code == 200, 300, "auto decided")
        health = httpx.get(f"{url}/health").json()
        answer = httpx.post(f"{url}/v1/embeddings", json={"input": ["a note"]}, timeout=60)
    assert answer.status_code == 200
    auto = health["auto"]
    figures = {c["engine"]: c for c in auto["candidates"]}
    expected = ["torch fp32", "torch int8"]
    if {"avx512_bf16", "amx_tile"} & hardware.cpu_features():
        expected.append("torch bf16")
    assert list(figures) == expected  # no ONNX export here: never a candidate
    holding = {
        name: f for name, f in figures.items() if f["min_cosine"] >= autotune.BOUND
    }  # fmt: skip
    assert "torch fp32" in holding and figures["torch fp32"]["min_cosine"] == pytest.approx(1.0)
    for f in holding.values():
        assert f["document_batch_s"] > 0 and f["query_s"] > 0 and f["size_mb"] > 0
    # Of the engines within CLOSE of the fastest batch, the most accurate runs: the timings here
    # are whatever this machine measured (tiny-model engines often land within 10 % of each
    # other), so the test checks the rule, with room for /health's rounding to 5 decimals.
    reach = autotune_measure.CLOSE * min(f["document_batch_s"] for f in holding.values())
    slack = 2e-5
    within = {n: f for n, f in holding.items() if f["document_batch_s"] <= reach + slack}
    surely = [f["min_cosine"] for f in holding.values() if f["document_batch_s"] <= reach - slack]
    chosen = auto["documents"]
    assert chosen == f"{health['backend']} {health['dtype']}"
    assert chosen in within
    assert holding[chosen]["min_cosine"] >= max(surely) - 1e-5
    assert auto["cache_file"] and Path(auto["cache_file"]).is_file()
    assert auto["seconds"] > 0


def test_auto_measures_only_on_a_cpu_with_both_settings_auto(tmp_path: Path) -> None:
    on = settings(tmp_path, tmp_path)
    assert hardware.measures(on, torch.device("cpu"))
    assert not hardware.measures(on, torch.device("cuda"))  # a GPU runs torch, bf16 if it can
    assert not hardware.measures(on, torch.device("mps"))
    for values in (
        {"EMBED_AUTO_MEASURE": False},
        {"EMBED_DTYPE": "bf16"},
        {"EMBED_BACKEND": "torch"},
    ):
        assert not hardware.measures(settings(tmp_path, tmp_path, **values), torch.device("cpu"))


def test_auto_device_is_apple_silicons_gpu_when_torch_sees_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert hardware.resolve_device("auto").type == "mps"
    assert hardware.resolve_dtype("auto", torch.device("mps")) == "fp32"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert hardware.resolve_device("auto").type == "cpu"
    with pytest.raises(errors.ModelLoadError, match="EMBED_DEVICE=mps"):
        hardware.resolve_device("mps")


@pytest.mark.parametrize("fixture", ["tiny_qwen3_path", "minilm_path"])
def test_timings_run_through_the_first_layers_only_and_the_model_is_whole_again_after(
    fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    folder: Path = request.getfixturevalue(fixture)
    with torch_threads_kept():
        embedder = model.Embedder(
            settings(folder, tmp_path / "state", EMBED_BACKEND="torch", EMBED_DTYPE="fp32")
        )
        ids = embedder.tokenize(["a short note about rivers"])
        whole = embedder.embed_ids(ids)
        found = autotune_measure._blocks(embedder.model)
        assert found is not None
        blocks = found[2]
        ran: list[int] = []
        hooks = [
            block.register_forward_hook(lambda *_, i=i: ran.append(i))
            for i, block in enumerate(blocks)
        ]
        try:
            with autotune_measure.first_layers(embedder, 1) as scale:
                cut = embedder.embed_ids(ids)
            assert ran == [0] and scale == len(blocks)  # one of them ran, scaled to all
            assert not np.allclose(cut, whole, atol=1e-4)
            ran.clear()
            assert np.allclose(embedder.embed_ids(ids), whole, atol=1e-6)
            assert ran == list(range(len(blocks)))
            with autotune_measure.first_layers(embedder, None) as scale:
                assert scale == 1.0  # None: the whole model (an ONNX candidate among them)
        finally:
            for hook in hooks:
                hook.remove()


def test_a_timed_query_computes_every_token_where_the_tokenizer_reads_it_as_the_instruction(
    tiny_qwen3_path: Path, tmp_path: Path
) -> None:
    """A tokenizer that maps the probe text and the query instruction to the same tokens (all
    unknown words) must not send the timed query through the instruction's cache: each pooled
    engine switched in would rebuild that cache inside its timing, the reference (timed alone)
    only once."""
    with torch_threads_kept():
        embedder = model.Embedder(
            settings(tiny_qwen3_path, tmp_path / "state", EMBED_BACKEND="torch", EMBED_DTYPE="fp32")
        )
        with ThreadPoolExecutor(1) as lanes:
            bench = autotune_measure._Bench(embedder, lanes)
            embedder._prompt_ids = bench.query[:5].copy()  # the timed query starts "with it"
            embedder._prompt_cache = None
            found = autotune_measure._blocks(embedder.model)
            assert found is not None
            seen: list[int] = []
            hook = found[2][0].register_forward_hook(
                lambda _m, args, _out: seen.append(args[0].shape[1])
            )
            try:
                bench.timed([bench.query], autotune.QUERY_TOKENS)
            finally:
                hook.remove()
        assert seen == [autotune.QUERY_TOKENS]  # one pass, over all of the query's tokens
        assert embedder._prompt_cache is None and embedder.reuse_instruction
        assert embedder.embed_ids([bench.query]).shape[0] == 1  # served queries still reuse it
        assert embedder._prompt_cache is not None
