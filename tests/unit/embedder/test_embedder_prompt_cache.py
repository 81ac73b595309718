"""Queries run only their own tokens past the query instruction's cached keys and values
(embed_server.prompt_cache), on the tiny Qwen3 and its byte-level BPE."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from helpers import torch_threads_kept

QUERIES = ["bread", "cat dog river mountain", "how do I test the server", "a", "(x) 12?"]


@pytest.fixture(scope="module")
def embedder(tiny_qwen3_path: Path):
    from embed_server.config import EmbedderSettings
    from embed_server.model import Embedder

    settings = EmbedderSettings(_env_file=None, EMBED_MODEL=str(tiny_qwen3_path))
    with torch_threads_kept():
        return Embedder(settings, engine=("torch", "fp32"))


@pytest.fixture(autouse=True)
def _threads() -> Iterator[None]:
    with torch_threads_kept():  # embedding sets the calling thread's torch threads
        yield


def whole(embedder, ids: Sequence[np.ndarray]) -> np.ndarray:
    """The vectors with the cache out of the way: every token through every layer."""
    embedder.reuse_instruction = False
    try:
        return embedder.embed_ids(ids)
    finally:
        embedder.reuse_instruction = True


@pytest.fixture
def computed(embedder) -> Iterator[list[int]]:
    """The number of tokens each forward pass of the model computes."""
    seen: list[int] = []
    handle = embedder.model.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    yield seen
    handle.remove()


def queries(embedder, texts: Sequence[str]) -> list[np.ndarray]:
    return embedder.tokenize([embedder.prompt("query") + text for text in texts])


def test_a_batch_of_queries_computes_only_their_own_tokens_and_gives_the_whole_inputs_vectors(
    embedder, computed: list[int]
) -> None:
    ids = queries(embedder, QUERIES)
    expected = whole(embedder, ids)
    embedder._prompt_cache = None
    computed.clear()
    served = embedder.embed_ids(ids)
    again = embedder.embed_ids(ids)
    prefix = embedder.instruction_tokens
    rest = max(len(x) for x in ids) - prefix
    assert prefix >= 5
    assert computed == [prefix, rest, rest]  # the instruction once, then each batch's own tokens
    assert np.sum(served * expected, axis=1).min() >= 0.99999
    assert np.array_equal(served, again)


def test_each_query_alone_matches_the_same_query_in_a_batch(embedder) -> None:
    ids = queries(embedder, QUERIES)
    batched = embedder.embed_ids(ids)
    for one, vector in zip(ids, batched, strict=True):
        assert float(embedder.embed_ids([one])[0] @ vector) >= 0.99999


def test_documents_and_a_batch_mixing_in_a_document_run_whole(
    embedder, computed: list[int]
) -> None:
    ids = [*queries(embedder, QUERIES[:2]), *embedder.tokenize(["bread and butter"])]
    expected = whole(embedder, ids)
    computed.clear()
    served = embedder.embed_ids(ids)
    assert computed == [max(len(x) for x in ids)]
    assert np.sum(served * expected, axis=1).min() >= 0.99999


def test_the_cached_tokens_are_the_instructions_that_no_following_text_changes() -> None:
    from embed_server.prompt_cache import stable_prefix

    def tokenize(texts: Sequence[str]) -> list[np.ndarray]:
        """One token per character, but ":" and a letter after it are one (as Qwen's ":how")."""
        out = []
        for text in texts:
            ids, i = [], 0
            while i < len(text):
                merged = text[i] == ":" and i + 1 < len(text) and text[i + 1].isalpha()
                ids.append(1000 + ord(text[i + 1]) if merged else ord(text[i]))
                i += 2 if merged else 1
            out.append(np.array([*ids, 0]))
        return out

    prefix = stable_prefix(tokenize, "Query:")
    assert prefix.tolist() == [ord(c) for c in "Query"]


def test_the_cache_is_made_again_for_fewer_layers_and_for_all_of_them_after(
    embedder,
) -> None:
    from embed_server.autotune_measure import first_layers

    ids = queries(embedder, QUERIES)
    embedder.embed_ids(ids)
    full = embedder._prompt_cache[1]
    assert len(full.layers) == embedder.model.config.num_hidden_layers
    with first_layers(embedder, 1):
        served = embedder.embed_ids(ids)
        assert len(embedder._prompt_cache[1].layers) == 1
        assert np.sum(served * whole(embedder, ids), axis=1).min() >= 0.99999
    served = embedder.embed_ids(ids)
    assert len(embedder._prompt_cache[1].layers) == len(full.layers)
    assert np.sum(served * whole(embedder, ids), axis=1).min() >= 0.99999


def test_int8_queries_past_the_cache_stay_within_rounding_of_the_whole_int8_pass(
    tiny_qwen3_path: Path,
) -> None:
    from embed_server.config import EmbedderSettings
    from embed_server.model import Embedder

    settings = EmbedderSettings(_env_file=None, EMBED_MODEL=str(tiny_qwen3_path))
    int8 = Embedder(settings, engine=("torch", "int8"))
    assert int8.dtype == "int8"
    ids = queries(int8, QUERIES)
    served = int8.embed_ids(ids)
    assert int8._prompt_cache is not None and int8._prompt_cache[0][1] == "int8"
    assert np.sum(served * whole(int8, ids), axis=1).min() >= 0.999
