"""Every candidate shape bench/rerank.py times (bench/rerank_models.py) builds from its
published config and loads through the service's own Reranker, which gives one finite score per
pair: what the bench measures is what the embedder would serve."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.rerank_models import MODELS, WORDS, build_cross_encoder
from embed_server.config import EmbedderSettings
from embed_server.rerank import Reranker


@pytest.mark.parametrize("name", list(MODELS))
def test_each_candidate_shape_loads_through_the_services_reranker(
    name: str, tmp_path: Path
) -> None:
    family, shape = MODELS[name]
    # one layer and the word tokenizer's vocabulary: the same architecture, built in seconds
    small = shape | {"num_hidden_layers": 1, "vocab_size": WORDS + 4}
    folder = build_cross_encoder(tmp_path / "model", family, small)
    settings = EmbedderSettings(
        _env_file=None, EMBED_MODEL="-", RERANK_MODEL=str(folder), RERANK_DTYPE="fp32"
    )
    reranker = Reranker(settings)
    pairs = [("w1 w2 w3", " ".join(f"w{i}" for i in range(n))) for n in (5, 40, 300)]
    scores = reranker.embed_ids(reranker.tokenize(pairs))
    assert scores.shape == (3, 1) and np.isfinite(scores).all()
    assert reranker.max_input_tokens >= 300  # a whole ~300-token passage fits, as timed
