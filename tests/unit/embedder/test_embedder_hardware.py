"""EMBED_DEVICE and EMBED_DTYPE resolve to what this machine runs best, and say so on /health."""

from __future__ import annotations

import platform
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import torch_threads_kept
from starlette.testclient import TestClient

from embed_server import api as app_module
from embed_server import config, errors, hardware, model

CPU = torch.device("cpu")


def cpuinfo_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


@pytest.mark.skipif(
    platform.machine() != "x86_64" or not Path("/proc/cpuinfo").exists(),
    reason="reads x86 flags from /proc/cpuinfo",
)
def test_auto_picks_bf16_exactly_when_the_cpu_computes_it_natively() -> None:
    native = bool({"avx512_bf16", "amx_bf16"} & cpuinfo_flags())
    assert hardware.resolve_dtype("auto", CPU) == ("bf16" if native else "fp32")


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "int8"])
def test_an_explicit_dtype_is_used_as_is_on_cpu(dtype: str) -> None:
    assert hardware.resolve_dtype(dtype, CPU) == dtype


def test_int8_is_refused_on_a_gpu_naming_the_setting() -> None:
    with pytest.raises(errors.ModelLoadError, match="EMBED_DTYPE=int8"):
        hardware.resolve_dtype("int8", torch.device("cuda"))


@pytest.mark.parametrize(
    ("klass", "expected"),
    [("avx512-bf16", "fp32"), ("avx2", "fp32"), ("amx", "bf16"), ("arm", "fp32"),
     ("other", "fp32")],
)  # fmt: skip
def test_the_rerankers_auto_precision_follows_the_cpu_class(klass: str, expected: str) -> None:
    assert hardware.resolve_rerank_dtype("auto", CPU, klass) == expected
    # an explicit setting wins over the class
    assert hardware.resolve_rerank_dtype("int8", CPU, klass) == "int8"


def test_rerank_int8_is_refused_on_a_gpu_naming_the_setting() -> None:
    with pytest.raises(errors.ModelLoadError, match="RERANK_DTYPE=int8"):
        hardware.resolve_rerank_dtype("int8", torch.device("cuda"))


def test_auto_device_is_cuda_only_when_torch_sees_a_gpu() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert hardware.resolve_device("auto").type == expected
    assert hardware.resolve_device("cpu").type == "cpu"


def test_cuda_without_a_gpu_is_an_error_not_a_silent_cpu_fallback() -> None:
    if torch.cuda.is_available():
        assert hardware.resolve_device("cuda").type == "cuda"
        return
    with pytest.raises(errors.ModelLoadError, match="EMBED_DEVICE=cuda"):
        hardware.resolve_device("cuda")


def tiny_qwen3_embedder(path: Path, dtype: str):
    settings = config.EmbedderSettings(
        _env_file=None,
        EMBED_MODEL=str(path),
        EMBED_DTYPE=dtype,
        EMBED_BACKEND="torch",  # torch's own precisions (ONNX Runtime: test_embedder_onnx.py)
        EMBED_THREADS=2,
    )
    return model.Embedder(settings)


# "auto" is whatever this machine resolves it to; bf16 runs on every CPU (emulated where the CPU
# lacks it), so the bf16 path is checked here even on a machine where auto means fp32.
@pytest.mark.parametrize("dtype", ["auto", "bf16"])
def test_weights_are_loaded_and_run_in_the_resolved_precision(
    tiny_qwen3_path: Path, dtype: str
) -> None:
    texts = ["river mountain", "bread flour water " * 20]
    with torch_threads_kept():
        embedder = tiny_qwen3_embedder(tiny_qwen3_path, dtype)
        fp32 = tiny_qwen3_embedder(tiny_qwen3_path, "fp32")
        vectors = embedder.embed_ids(embedder.tokenize(texts))
        reference = fp32.embed_ids(fp32.tokenize(texts))
    resolved = hardware.resolve_dtype(dtype, CPU)
    assert embedder.dtype == resolved
    expected = torch.bfloat16 if resolved == "bf16" else torch.float32
    assert {p.dtype for p in embedder.model.parameters()} == {expected}
    assert vectors.dtype == np.float32
    assert np.sum(vectors * reference, axis=1).min() >= 0.999
    if resolved == "bf16":  # computed in bf16 indeed: close to fp32, not equal to it
        assert not np.array_equal(vectors, reference)
    else:
        np.testing.assert_array_equal(vectors, reference)


def test_health_names_the_setting_when_cuda_is_asked_for_without_a_gpu(
    minilm_path: Path,
) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    settings = config.EmbedderSettings(
        _env_file=None, EMBED_MODEL=str(minilm_path), EMBED_DEVICE="cuda"
    )
    # the loader passed in
    app = app_module.create_app(settings, loader=model.Embedder)
    with TestClient(app, base_url="http://localhost:8080") as client:  # a Host it answers
        end = time.monotonic() + 60
        while (response := client.get("/health")).status_code == 503:
            assert time.monotonic() < end, "model load did not finish"
            time.sleep(0.02)
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "model_load_failed"
    assert "EMBED_DEVICE=cuda" in response.json()["error"]["message"]


@pytest.mark.parametrize(("threads", "side_by_side"), [(1, 1), (2, 2), (8, 2)])
def test_at_most_two_micro_batches_run_side_by_side_on_cpu(
    minilm_path: Path, threads: int, side_by_side: int
) -> None:
    settings = config.EmbedderSettings(
        _env_file=None, EMBED_MODEL=str(minilm_path), EMBED_THREADS=threads, EMBED_DTYPE="fp32"
    )
    with torch_threads_kept():
        assert model.Embedder(settings).parallelism == side_by_side
