"""EMBED_DTYPE=int8 on torch (embed_server.int8): per-token scales, SmoothQuant, the FFN down
projections two-pass or in floating point.

The accuracy figures are measured on the real MiniLM weights; which engine is the default is
measured at start (test_embedder_auto.py) and by bench/embed_throughput.py, not here.
"""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import REPO_ROOT, torch_threads_kept

from embed_server import config, hardware, int8, model
from embed_server.batching import Engine

CRANFIELD = REPO_ROOT / "bench" / "datasets" / "cranfield" / "docs"
SHORT = ["hi", "wing", "flutter", "the", "heat transfer", "shock waves", "bread", "ok"]
QUERIES = ["what similarity laws must be obeyed", "boundary layer in simple shear flow"]
# Two-pass int8 runs only where int8 weights use all 8 bits (x86 with AVX-512 VNNI:
# hardware.int8_down_projection); without VNNI the kernels' u8 x s8 pair sums are 16-bit and
# two-pass's full-range inputs overflow them, so there it is neither used nor tested.
needs_vnni = pytest.mark.skipif(
    not hardware.int8_full_range(), reason="two-pass int8 needs int8 on all 8 bits (VNNI)"
)


def load(folder: Path, dtype: str, threads: int = 2) -> model.Embedder:
    settings = config.EmbedderSettings(
        _env_file=None, EMBED_MODEL=str(folder), EMBED_THREADS=threads
    )
    with torch_threads_kept():
        return model.Embedder(settings, engine=("torch", dtype))


def embed(embedder: model.Embedder, texts: list[str]) -> np.ndarray:
    engine = Engine(embedder, batch_tokens=2048, queue_size=4, max_round_inputs=4096)
    engine.start()
    try:
        with torch_threads_kept():
            return engine.submit(texts).result().vectors
    finally:
        engine.stop()


@pytest.fixture(scope="module")
def minilm_texts() -> list[str]:
    docs = [f.read_text(encoding="utf-8") for f in sorted(CRANFIELD.glob("*.md"))[:60]]
    return docs + QUERIES + SHORT


@pytest.fixture(scope="module")
def minilm_fp32(minilm_path: Path, minilm_texts: list[str]) -> np.ndarray:
    return embed(load(minilm_path, "fp32"), minilm_texts)


@pytest.mark.parametrize(
    ("down", "gemm"),
    [
        pytest.param(torch.bfloat16, "onednn", id="amx"),
        pytest.param(torch.bfloat16, "fbgemm", id="down-bf16-fbgemm"),
        pytest.param(None, "fbgemm", id="vnni-two-pass", marks=needs_vnni),
    ],
)
def test_int8_keeps_the_bound_for_documents_queries_and_one_word_inputs_where_per_tensor_fails(
    minilm_path: Path,
    minilm_texts: list[str],
    minilm_fp32: np.ndarray,
    down: torch.dtype | None,
    gemm: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(model, "int8_down_projection", lambda: down)
    monkeypatch.setattr(model, "int8_gemm", lambda: gemm)
    vectors = embed(load(minilm_path, "int8"), minilm_texts)
    cosines = np.sum(minilm_fp32 * vectors, axis=1)
    short = cosines[-len(SHORT) :]
    assert cosines.min() >= 0.995, f"lowest {cosines.min():.5f}, short inputs {short.min():.5f}"
    # torch.ao's dynamic int8 (one scale per tensor), what EMBED_DTYPE=int8 ran before
    per_tensor = load(minilm_path, "fp32")
    per_tensor.model = model.int8_linear(per_tensor.model)
    old = np.sum(minilm_fp32 * embed(per_tensor, minilm_texts), axis=1)
    assert old[-len(SHORT) :].min() < 0.995 < short.min()


@needs_vnni
def test_two_pass_int8_multiplies_as_with_16_bit_inputs_where_one_pass_loses_8_bit_steps() -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(768, 256, bias=False)
    x = torch.nn.functional.silu(torch.randn(2, 7, 768) * 2) * torch.randn(2, 7, 768)  # long tail
    x[0, 3, 5] = 60.0
    groups = {
        passes: int8._Group([linear], x.abs().amax((0, 1)), False, None, two_pass=passes == 2)
        for passes in (1, 2)
    }
    errors = {}
    for passes, group in groups.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's quantised-tensor API: deprecation notices
            weight = torch.ops.quantized.linear_unpack(group.packed)[0].dequantize()
        assert group.inverse is not None  # no norm to fold the smoothing into
        exact = torch.nn.functional.linear(x * group.inverse, weight)  # the int8 weights' product
        got = group(x, 0)
        errors[passes] = float((got - exact).norm() / exact.norm())
    assert errors[2] < 3e-4 < 30 * errors[2] < errors[1], errors


@pytest.mark.parametrize(
    "down", [torch.bfloat16, torch.float32, None], ids=["amx", "no-vnni", "vnni-no-amx"]
)
def test_qkv_and_gate_up_run_as_one_int8_gemm_each_and_the_ffn_down_projection_as_the_cpu_suits(
    tiny_qwen3_path: Path, down: torch.dtype | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model, "int8_down_projection", lambda: down)
    monkeypatch.setattr(
        model, "int8_gemm", lambda: "onednn" if down == torch.bfloat16 else "fbgemm"
    )
    embedder = load(tiny_qwen3_path, "int8")
    layer = embedder.model.layers[0]
    attention, mlp = layer.self_attn, layer.mlp
    assert all(isinstance(m, int8.Int8Linear) for m in (attention.q_proj, attention.k_proj))
    assert attention.q_proj.group is attention.k_proj.group is attention.v_proj.group
    assert mlp.gate_proj.group is mlp.up_proj.group
    assert attention.o_proj.group.sizes == [attention.o_proj.out_features]
    if down is None:  # two-pass int8, alone in its group
        assert isinstance(mlp.down_proj, int8.Int8Linear) and mlp.down_proj.group.two_pass
        assert not attention.o_proj.group.two_pass
    else:
        assert mlp.down_proj.weight.dtype == down
        assert type(mlp.down_proj) is (
            int8.KeptLinear if down != torch.float32 else torch.nn.Linear
        )
    # qwen3 is pre-norm: the smoothing of q/k/v and gate/up is folded into the RMSNorms
    assert attention.q_proj.group.inverse is None and mlp.gate_proj.group.inverse is None
    assert attention.o_proj.group.inverse is not None  # attention's output has no norm before it
    assert int8.packed_bytes(embedder.model) > 0


def test_two_pass_int8_is_refused_on_another_gemm_than_fbgemms() -> None:
    model_ = torch.nn.Sequential(torch.nn.Linear(8, 8))
    seen = int8.Calibration({}, [], {})
    with pytest.raises(ValueError, match="fbgemm"):
        int8.quantize(model_, seen, False, down=None, gemm="onednn")


def test_a_kept_layer_in_bf16_takes_and_returns_fp32_close_to_the_fp32_layer() -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 32)
    x = torch.randn(5, 64)
    for dtype, tolerance in ((torch.float32, 1e-6), (torch.bfloat16, 0.02)):
        kept = int8.KeptLinear(linear, dtype)
        y = kept(x)
        assert y.dtype == torch.float32 and kept.weight.dtype == dtype
        assert torch.allclose(y, linear(x), atol=tolerance, rtol=tolerance)


def test_folding_the_smoothing_into_the_rmsnorm_gives_the_same_vectors(
    tiny_qwen3_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = ["river mountain", "bread flour water " * 30, "cat"]
    folded = embed(load(tiny_qwen3_path, "int8"), texts)
    monkeypatch.setattr(int8, "PRE_NORM", set())
    scaled_at_run_time = embed(load(tiny_qwen3_path, "int8"), texts)
    np.testing.assert_allclose(folded, scaled_at_run_time, atol=2e-4)


def test_without_vnni_the_int8_weights_use_7_bits_so_16_bit_pair_sums_cannot_overflow(
    tiny_qwen3_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model, "int8_full_range", lambda: False)
    embedder = load(tiny_qwen3_path, "int8")
    groups = {
        id(m.group): m.group for m in embedder.model.modules() if isinstance(m, int8.Int8Linear)
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's quantised-tensor API: deprecation notices
        peaks = [
            int(torch.ops.quantized.linear_unpack(g.packed)[0].int_repr().abs().max())
            for g in groups.values()
        ]
    assert max(peaks) <= 63


def test_micro_batches_side_by_side_get_the_vectors_they_get_one_at_a_time(
    tiny_qwen3_path: Path,
) -> None:
    """Each thread keeps its own last input of a group (a thread-local cache): two batches run
    at once in two threads give exactly what each gives alone."""
    embedder = load(tiny_qwen3_path, "int8")
    first = embedder.tokenize(["bread flour water " * 12, "cat"])
    second = embedder.tokenize(["river mountain " * 20, "garden tomato", "dog"])
    with torch_threads_kept():
        alone = [embedder.embed_ids(first, 2), embedder.embed_ids(second, 2)]
    with ThreadPoolExecutor(2) as pool:
        for _ in range(10):
            runs = [pool.submit(embedder.embed_ids, batch, 2) for batch in (first, second)]
            for run, expected in zip(runs, alone, strict=True):
                np.testing.assert_array_equal(run.result(), expected)


def test_calibration_leaves_padded_positions_out(tiny_qwen3_path: Path) -> None:
    embedder = load(tiny_qwen3_path, "fp32")
    texts = ["cat", "river mountain garden tomato " * 6]
    ids = embedder.tokenize(texts)

    def forward(input_ids: torch.Tensor, mask: torch.Tensor) -> None:
        with torch.inference_mode(), torch_threads_kept():
            embedder.model(input_ids=input_ids, attention_mask=mask, use_cache=False)

    padded = int8.calibrate(embedder.model, [embedder._padded(ids)], forward)  # one batch
    alone = int8.calibrate(embedder.model, [embedder._padded([x]) for x in ids], forward)
    assert padded.groups == alone.groups
    for name, peak in alone.maxima.items():
        torch.testing.assert_close(padded.maxima[name], peak, atol=1e-4, rtol=1e-4)


def test_a_kept_calibration_makes_int8_again_without_a_calibration_pass(
    tiny_qwen3_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """auto keeps int8's calibration beside its decision: a later start skips that pass."""
    from embed_server import autotune

    first = load(tiny_qwen3_path, "int8")
    assert first.calibration is not None
    decision = tmp_path / "auto-engine-0123456789abcdef.json"
    autotune.write_calibration(decision, first.calibration)
    again = load(tiny_qwen3_path, "fp32")
    again.calibration = autotune.read_calibration(decision)

    def no_pass(*args: object, **kwargs: object) -> None:
        raise AssertionError("calibrated again")

    monkeypatch.setattr(int8, "calibrate", no_pass)
    with torch_threads_kept():
        again.load_engine("torch", "int8")
    texts = ["river mountain", "bread flour water " * 30, "cat"]
    np.testing.assert_array_equal(embed(again, texts), embed(first, texts))
