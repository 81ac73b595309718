"""EMBED_BACKEND=onnx serves the same vectors as torch fp32, and `auto` picks per CPU class."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch
from helpers import REPO_ROOT, torch_threads_kept

from embed_server import config, errors, hardware, model, onnx_backend
from embed_server import export as export_onnx

CPU = torch.device("cpu")
CRANFIELD = REPO_ROOT / "bench" / "datasets" / "cranfield" / "docs"
QUERIES = ["what similarity laws must be obeyed", "boundary layer in simple shear flow", "hi"]


@pytest.fixture(scope="session")
def onnx_exports(tmp_path_factory: pytest.TempPathFactory, minilm_path, tiny_qwen3_path) -> Path:
    """EMBED_ONNX_DIR holding the MiniLM and tiny Qwen3 exports, made as the image makes them."""
    root = tmp_path_factory.mktemp("onnx")
    with torch_threads_kept():
        models = [str(minilm_path), str(tiny_qwen3_path)]
        assert export_onnx.main([*models, "--onnx-dir", str(root)]) == 0
    return root


def load(
    folder: Path, backend: str, dtype: str, onnx_dir: Path | str = "/nonexistent", **extra: object
) -> object:
    settings = config.EmbedderSettings(
        _env_file=None,
        EMBED_MODEL=str(folder),
        EMBED_BACKEND=backend,
        EMBED_DTYPE=dtype,
        EMBED_ONNX_DIR=str(onnx_dir),
        EMBED_THREADS=2,
        **extra,
    )
    with torch_threads_kept():
        return model.Embedder(settings)


def texts(n: int = 40) -> list[str]:
    files = sorted(CRANFIELD.glob("*.md"))[:n]
    return [f.read_text(encoding="utf-8") for f in files] + QUERIES


def embed(embedder: object, inputs: list[str]) -> np.ndarray:
    ids = embedder.tokenize(inputs)  # type: ignore[attr-defined]
    with torch_threads_kept():  # batches of mixed lengths: padding on the model's side
        return np.concatenate(
            [embedder.embed_ids(ids[i : i + 8]) for i in range(0, len(ids), 8)]  # type: ignore[attr-defined]
        )


def test_the_onnx_backend_serves_embeddings_matching_torch_fp32(
    start_embedder, onnx_exports: Path, minilm_path: Path
) -> None:
    inputs = texts()
    reference = embed(load(minilm_path, "torch", "fp32"), inputs)
    server = start_embedder(
        {
            "EMBED_MODEL": str(minilm_path),
            "EMBED_BACKEND": "onnx",
            "EMBED_DTYPE": "auto",
            "EMBED_ONNX_DIR": str(onnx_exports),
        }
    )
    health = httpx.get(f"{server.url}/health").json()
    assert (health["backend"], health["dtype"]) == ("onnx", hardware.ONNX_AUTO_DTYPE)
    answer = httpx.post(f"{server.url}/v1/embeddings", json={"input": inputs}, timeout=120)
    assert answer.status_code == 200, answer.text
    served = np.array([d["embedding"] for d in answer.json()["data"]], dtype=np.float32)
    cosines = np.sum(served * reference, axis=1)
    assert cosines.min() >= 0.995, f"lowest cosine to torch fp32: {cosines.min():.5f}"


def test_onnx_int8_keeps_documents_within_the_bound_but_not_one_word_inputs(
    onnx_exports: Path, minilm_path: Path
) -> None:
    """Why int8 is opt-in: per-tensor activation scales fit sentences, not a lone word."""
    docs = texts(40)[:40]
    words = ["hi", "wing", "flutter", "the"]
    reference = embed(load(minilm_path, "torch", "fp32"), docs + words)
    vectors = embed(load(minilm_path, "onnx", "int8", onnx_exports), docs + words)
    cosines = np.sum(vectors * reference, axis=1)
    assert cosines[:40].min() >= 0.995
    assert cosines[40:].min() < 0.995  # measured 0.980: the reason auto does not pick it


def test_the_int8_export_keeps_weights_in_7_bits_so_cpus_without_vnni_cannot_overflow(
    onnx_exports: Path, minilm_path: Path
) -> None:
    """AVX2-only CPUs add pairs of u8 x s8 products in 16 bits: 255 * 127 * 2 overflows it."""
    import onnx
    from onnx import numpy_helper

    path = onnx_backend.onnx_dir(onnx_exports, minilm_path) / onnx_backend.FILES["int8"]
    weights = [
        numpy_helper.to_array(init)
        for init in onnx.load(path).graph.initializer
        if init.data_type == onnx.TensorProto.INT8 and len(init.dims) == 2
    ]
    assert len(weights) >= 6 * 5  # per layer: q, k, v, attention output, FFN input
    assert max(int(np.abs(w.astype(np.int16)).max()) for w in weights) <= 64


@pytest.mark.parametrize("name", ["minilm", "qwen3"])
def test_onnx_fp32_gives_torch_fp32_vectors_for_both_paddings(
    name: str, onnx_exports: Path, minilm_path: Path, tiny_qwen3_path: Path
) -> None:
    folder = minilm_path if name == "minilm" else tiny_qwen3_path  # right / left padded
    inputs = texts(12)
    reference = embed(load(folder, "torch", "fp32"), inputs)
    vectors = embed(load(folder, "onnx", "fp32", onnx_exports), inputs)
    assert np.sum(vectors * reference, axis=1).min() >= 0.9999


def test_an_explicit_onnx_backend_without_an_export_names_the_command_to_run(
    minilm_path: Path, tmp_path: Path
) -> None:
    with pytest.raises(errors.ModelLoadError, match=r"export_onnx\.py"):
        load(minilm_path, "onnx", "int8", tmp_path)


def test_auto_without_measuring_runs_the_classs_torch_engine_and_says_why_on_health(
    minilm_path: Path, tmp_path: Path
) -> None:
    embedder = load(minilm_path, "auto", "auto", tmp_path, EMBED_AUTO_MEASURE=False)
    assert embedder.backend == "torch"  # type: ignore[attr-defined]
    expected = hardware.resolve_engine("auto", "auto", CPU)[1]  # this CPU's class in the table
    assert embedder.dtype == expected  # type: ignore[attr-defined]
    assert embedder.decision["measured"] is False  # type: ignore[attr-defined]
    assert "EMBED_AUTO_MEASURE=false" in embedder.decision["reason"]  # type: ignore[attr-defined]


def test_auto_on_an_avx512_bf16_cpu_without_an_export_says_nothing_of_onnx(
    minilm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    # The default image (no ONNX_EXPORT) on such a CPU, the user having set nothing: auto
    # measures only what the install carries, so there is no fallback to log (issue 26).
    monkeypatch.setattr(hardware, "cpu_features", lambda: {"avx2", "avx512_bf16"})
    with caplog.at_level(logging.DEBUG):
        embedder = load(minilm_path, "auto", "auto", tmp_path, EMBED_STATE_DIR=str(tmp_path))
    assert embedder.backend == "torch"  # type: ignore[attr-defined]
    assert "export" not in caplog.text and "EMBED_BACKEND=onnx" not in caplog.text
    candidates = [c["engine"] for c in embedder.decision["candidates"]]  # type: ignore[attr-defined]
    assert not [c for c in candidates if c.startswith("onnx")]


def test_an_explicit_int8_runs_torchs_per_token_int8_with_or_without_an_export(
    minilm_path: Path, onnx_exports: Path, tmp_path: Path, caplog
) -> None:
    with caplog.at_level(logging.INFO):
        for folder in (tmp_path, onnx_exports):
            embedder = load(minilm_path, "auto", "int8", folder)
            assert (embedder.backend, embedder.dtype) == ("torch", "int8")  # type: ignore[attr-defined]
    assert "export" not in caplog.text


@pytest.mark.parametrize(
    ("features", "machine", "klass", "engine"),
    [
        ({"avx2", "avx512_bf16", "amx_tile"}, "x86_64", "amx", ("torch", "bf16")),
        ({"avx2", "avx512_bf16"}, "x86_64", "avx512-bf16", ("torch", "bf16")),
        ({"avx2"}, "x86_64", "avx2", ("torch", "fp32")),
        (set(), "aarch64", "arm", ("torch", "fp32")),
        (set(), "x86_64", "other", ("torch", "fp32")),
    ],
)
def test_without_measuring_auto_picks_the_tables_engine_for_each_cpu_class(
    features: set[str], machine: str, klass: str, engine: tuple[str, str]
) -> None:
    assert hardware.cpu_class(features, machine) == klass
    assert hardware.resolve_engine("auto", "auto", CPU, klass) == engine


def test_the_avx2_class_gets_exact_torch_fp32_and_onnx_stays_a_choice() -> None:
    assert hardware.AUTO_ENGINE["avx2"] == ("torch", "fp32")
    assert hardware.resolve_engine("auto", "bf16", CPU, "avx2") == ("torch", "bf16")
    assert hardware.resolve_engine("auto", "int8", CPU, "avx2") == ("torch", "int8")
    assert hardware.resolve_engine("onnx", "auto", CPU, "avx2") == ("onnx", "fp32")
    with pytest.raises(errors.ModelLoadError, match="EMBED_DTYPE=bf16"):
        hardware.resolve_engine("onnx", "bf16", CPU, "avx2")
    with pytest.raises(errors.ModelLoadError, match="CPU only"):
        hardware.resolve_engine("onnx", "auto", torch.device("cuda"), "avx2")


def test_a_onednn_isa_cap_to_avx2_is_read_as_the_avx2_class(monkeypatch) -> None:
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert not {"avx512_bf16", "amx_tile"} & hardware.cpu_features()


def test_a_onednn_isa_cap_to_avx512_vnni_hides_bf16_and_amx_as_on_ice_lake(monkeypatch) -> None:
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_VNNI")
    assert not {"avx512_bf16", "amx_tile"} & hardware.cpu_features()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
    assert "amx_tile" not in hardware.cpu_features()
