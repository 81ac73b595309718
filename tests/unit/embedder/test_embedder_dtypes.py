"""Every EMBED_DTYPE loads the real MiniLM and stays close to fp32 (in-process, no server).

The bounds are today's measurements, kept so the paths cannot rot; which precision is the
default is decided by the benchmark in bench/, not here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import torch_threads_kept

TEXTS = [
    "The cat sat on the warm windowsill all afternoon.",
    "Shock waves form when the flow over a wing becomes supersonic. " * 8,
    "bread",
]


def embed(path: Path, dtype: str) -> np.ndarray:
    from embed_server import config, model

    settings = config.EmbedderSettings(
        _env_file=None, EMBED_MODEL=str(path), EMBED_DTYPE=dtype, EMBED_THREADS=2
    )
    with torch_threads_kept():
        embedder = model.Embedder(settings)
        return embedder.embed_ids(embedder.tokenize(TEXTS))


@pytest.fixture(scope="module")
def fp32(minilm_path: Path) -> np.ndarray:
    return embed(minilm_path, "fp32")


@pytest.mark.parametrize(("dtype", "min_cosine"), [("bf16", 0.999), ("int8", 0.995)])
def test_reduced_precision_vectors_stay_close_to_fp32(
    minilm_path: Path, fp32: np.ndarray, dtype: str, min_cosine: float
) -> None:
    vectors = embed(minilm_path, dtype)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(vectors * fp32, axis=1)
    assert cosines.min() >= min_cosine, cosines
