"""Pooling as a model's sentence-transformers files declare it (CLS, mean, max), the refusal of
poolings the service does not implement, and `<|endoftext|>` appended by the service for a Qwen3
tokenizer that lacks it. In-process, on the real MiniLM weights and the tiny Qwen3 model; the
references are computed here straight from the transformers model, one text at a time."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import torch_threads_kept
from transformers import AutoModel, AutoTokenizer

from embed_server import config, errors, model

TEXTS = [  # different lengths: one padded batch
    "bread",
    "Shock waves form when the flow over a wing becomes supersonic.",
    "The cat sat on the warm windowsill all afternoon, then slept.",
]
MODES = {
    "cls": "pooling_mode_cls_token",
    "mean": "pooling_mode_mean_tokens",
    "max": "pooling_mode_max_tokens",
}


def with_pooling(source: Path, folder: Path, **flags: bool) -> Path:
    """A copy of MiniLM's folder (weights linked) whose 1_Pooling/config.json sets `flags`."""
    folder.mkdir()
    for item in source.iterdir():
        if item.name != "1_Pooling":
            (folder / item.name).symlink_to(item)
    (folder / "1_Pooling").mkdir()
    pooling = {"word_embedding_dimension": 384, **dict.fromkeys(MODES.values(), False), **flags}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return folder


def load(folder: Path, **settings: object):
    values = {"EMBED_MODEL": str(folder), "EMBED_DTYPE": "fp32", "EMBED_THREADS": 2, **settings}
    return model.Embedder(config.EmbedderSettings(_env_file=None, **values))


def reference(folder: Path, mode: str) -> np.ndarray:
    """Each text alone (no padding) through the transformers model, pooled as `mode`."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    encoder = AutoModel.from_pretrained(folder).eval()
    vectors = []
    for text in TEXTS:
        with torch.inference_mode():
            hidden = encoder(**tokenizer(text, return_tensors="pt")).last_hidden_state[0]
        pooled = {"cls": hidden[0], "mean": hidden.mean(dim=0), "max": hidden.max(dim=0).values}
        vectors.append(torch.nn.functional.normalize(pooled[mode], dim=0).numpy())
    return np.stack(vectors)


@pytest.mark.parametrize("mode", list(MODES))
def test_the_declared_pooling_is_applied_to_every_text_of_a_padded_batch(
    minilm_path: Path, tmp_path: Path, mode: str
) -> None:
    folder = with_pooling(minilm_path, tmp_path / mode, **{MODES[mode]: True})
    with torch_threads_kept():
        embedder = load(folder)
        vectors = embedder.embed_ids(embedder.tokenize(TEXTS))
        expected = reference(folder, mode)
    assert embedder.pooling == mode
    np.testing.assert_allclose(vectors, expected, atol=2e-5)


@pytest.mark.parametrize(
    "flags",
    [
        {"pooling_mode_mean_sqrt_len_tokens": True},
        {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True},
        {},  # declares none
    ],
)
def test_a_pooling_the_service_does_not_implement_fails_the_load_naming_the_file(
    minilm_path: Path, tmp_path: Path, flags: dict[str, bool]
) -> None:
    folder = with_pooling(minilm_path, tmp_path / "model", **flags)
    with torch_threads_kept(), pytest.raises(errors.ModelLoadError) as caught:
        load(folder)
    message = str(caught.value)
    assert str(folder / "1_Pooling" / "config.json") in message
    assert "unsupported pooling" in message and "CLS, mean, max or last-token" in message


def test_without_a_pooling_config_a_model_is_mean_pooled(minilm_path: Path, tmp_path: Path):
    folder = tmp_path / "model"
    folder.mkdir()
    for item in minilm_path.iterdir():
        if item.name not in ("1_Pooling", "modules.json"):
            (folder / item.name).symlink_to(item)
    assert model.sentence_transformers_pooling(folder) == "mean"


def test_a_qwen3_tokenizer_that_does_not_append_endoftext_gets_it_from_the_service(
    tiny_qwen3_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bare = tmp_path / "qwen3-bare-tokenizer"
    shutil.copytree(tiny_qwen3_path, bare)
    tokenizer_file = bare / "tokenizer.json"
    tokenizer = json.loads(tokenizer_file.read_text())
    tokenizer["post_processor"] = None  # as a tokenizer saved without Qwen3's template
    tokenizer_file.write_text(json.dumps(tokenizer))
    texts = ["bread", "cat dog river mountain " * 10]  # the second is cut at the token limit

    with torch_threads_kept(), caplog.at_level(logging.WARNING, logger="embedder.model"):
        own = load(bare, EMBED_MAX_TOKENS=16)
        card = load(tiny_qwen3_path, EMBED_MAX_TOKENS=16)  # its tokenizer appends the token
        eot = card.tokenizer.convert_tokens_to_ids("<|endoftext|>")
        assert own.tokenizer("bread")["input_ids"][-1] != eot  # the tokenizer itself does not
        ids, card_ids = own.tokenize(texts), card.tokenize(texts)
        vectors, card_vectors = own.embed_ids(ids), card.embed_ids(card_ids)

    assert [list(x) for x in ids] == [list(x) for x in card_ids]
    assert [int(x[-1]) for x in ids] == [eot, eot] and len(ids[1]) == 16
    np.testing.assert_allclose(vectors, card_vectors, atol=1e-6)
    assert "appending it ourselves" in caplog.text
