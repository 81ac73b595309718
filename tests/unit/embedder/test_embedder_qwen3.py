"""The Qwen3 path, with a tiny Qwen3 model laid out like Qwen3-Embedding, over real HTTP.

References are computed here straight from `Qwen3Model` outputs, the way the model card does.
"""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import numpy as np
import pytest
from conftest import EmbedderFactory

TASK = "Find my notes about the topic"
MAX_TOKENS = 32
TEXTS = [
    "bread",
    "cat dog river mountain",
    "shock wave flow over the wing " * 3,
    "a",
    "python code for the test server and client " * 2,
]


@pytest.fixture(scope="module")
def qwen3_url(start_embedder: EmbedderFactory, tiny_qwen3_path: Path) -> str:
    server = start_embedder(
        {
            "EMBED_MODEL": str(tiny_qwen3_path),
            "EMBED_MAX_TOKENS": str(MAX_TOKENS),
            "EMBED_BATCH_TOKENS": "64",  # several micro-batches of different padded lengths
            "EMBED_QUERY_TASK": TASK,
        }
    )
    return server.url


@pytest.fixture(scope="module")
def reference(tiny_qwen3_path: Path):
    """Model-card embedding: left-padded batch, last-token pooling, L2 normalisation."""
    import torch
    from transformers import AutoTokenizer, Qwen3Model

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen3_path, padding_side="left")
    model = Qwen3Model.from_pretrained(tiny_qwen3_path).eval()

    def embed(texts: list[str]) -> np.ndarray:
        batch = tokenizer(
            texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
        )
        with torch.inference_mode():
            hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"]
        assert bool((mask[:, -1] == 1).all()), "left padding puts every last token at the end"
        return torch.nn.functional.normalize(hidden[:, -1], dim=-1).numpy()

    embed.tokenizer = tokenizer  # type: ignore[attr-defined]
    embed.model = model  # type: ignore[attr-defined]
    return embed


def post(url: str, body: dict) -> dict:
    response = httpx.post(f"{url}/v1/embeddings", json=body, timeout=60.0)
    assert response.status_code == 200, response.text
    return response.json()


def vectors(body: dict) -> np.ndarray:
    return np.array([d["embedding"] for d in body["data"]], dtype=np.float32)


def test_health_reports_hidden_size_and_the_token_limit(qwen3_url: str) -> None:
    body = httpx.get(f"{qwen3_url}/health").json()
    assert (body["dimensions"], body["max_input_tokens"]) == (64, MAX_TOKENS)


def test_tokenizer_appends_endoftext_as_the_last_token(reference) -> None:
    tokenizer = reference.tokenizer
    eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    for text in TEXTS:
        assert tokenizer(text)["input_ids"][-1] == eot
    assert tokenizer("word " * 100, truncation=True, max_length=MAX_TOKENS)["input_ids"][-1] == eot


def test_documents_match_the_model_card_left_padded_last_token_reference(
    qwen3_url: str, reference
) -> None:
    served = vectors(post(qwen3_url, {"input": TEXTS}))
    expected = reference(TEXTS)
    assert np.sum(served * expected, axis=1).min() >= 0.9999


def test_each_vector_is_the_last_token_state_of_its_unpadded_text(
    qwen3_url: str, reference
) -> None:
    import torch

    served = vectors(post(qwen3_url, {"input": TEXTS}))
    for text, vector in zip(TEXTS, served, strict=True):
        ids = torch.tensor([reference.tokenizer(text)["input_ids"]])
        with torch.inference_mode():
            last = reference.model(input_ids=ids).last_hidden_state[0, -1]
        expected = torch.nn.functional.normalize(last, dim=0).numpy()
        assert float(vector @ expected) >= 0.9999, text


def test_query_instruction_is_applied_to_queries_only(qwen3_url: str, reference) -> None:
    query = vectors(post(qwen3_url, {"input": ["bread"], "input_type": "query"}))[0]
    document = vectors(post(qwen3_url, {"input": ["bread"]}))[0]
    instructed = f"Instruct: {TASK}\nQuery:bread"
    assert float(query @ reference([instructed])[0]) >= 0.9999
    assert float(document @ reference(["bread"])[0]) >= 0.9999
    assert float(query @ document) < 0.99


def test_health_says_how_many_instruction_tokens_every_query_reuses(
    qwen3_url: str, reference
) -> None:
    reused = httpx.get(f"{qwen3_url}/health").json()["query_engine"]["instruction_tokens_reused"]
    instruction = reference.tokenizer(f"Instruct: {TASK}\nQuery:")["input_ids"][:-1]  # no EOT
    assert 0 < reused < len(instruction)  # ":" may merge with the query's first characters
    assert (
        reference.tokenizer(f"Instruct: {TASK}\nQuery:bread")["input_ids"][:reused]
        == (instruction[:reused])
    )


def test_query_usage_counts_the_instruction_tokens(qwen3_url: str, reference) -> None:
    body = post(qwen3_url, {"input": "bread", "input_type": "query"})
    instructed = f"Instruct: {TASK}\nQuery:bread"
    expected = len(
        reference.tokenizer(instructed, truncation=True, max_length=MAX_TOKENS)["input_ids"]
    )
    assert body["usage"]["prompt_tokens"] == expected


def test_long_input_is_truncated_with_endoftext_kept_last(qwen3_url: str, reference) -> None:
    long_text = "cat dog river mountain " * 40
    body = post(qwen3_url, {"input": [long_text]})
    assert body["usage"]["prompt_tokens"] == MAX_TOKENS
    assert float(vectors(body)[0] @ reference([long_text])[0]) >= 0.9999


@pytest.mark.parametrize("dims", [32, 48])
def test_dimensions_truncate_matryoshka_style_and_renormalise(qwen3_url: str, dims: int) -> None:
    full = vectors(post(qwen3_url, {"input": TEXTS}))
    short = vectors(post(qwen3_url, {"input": TEXTS, "dimensions": dims}))
    assert short.shape == (len(TEXTS), dims)
    expected = full[:, :dims] / np.linalg.norm(full[:, :dims], axis=1, keepdims=True)
    np.testing.assert_allclose(short, expected, atol=1e-6)


def test_dimensions_work_with_base64_encoding(qwen3_url: str) -> None:
    body = post(qwen3_url, {"input": "bread", "dimensions": 40, "encoding_format": "base64"})
    vector = np.frombuffer(base64.b64decode(body["data"][0]["embedding"]), dtype="<f4")
    assert vector.shape == (40,)
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


@pytest.mark.parametrize("dims", [16, 31, 65, 4096])
def test_dimensions_outside_the_supported_range_get_422(qwen3_url: str, dims: int) -> None:
    response = httpx.post(f"{qwen3_url}/v1/embeddings", json={"input": "a", "dimensions": dims})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_dimensions"
    assert "between 32 and 64" in error["message"]


def test_default_query_task_is_the_model_cards_retrieval_instruction() -> None:
    from conftest import QWEN_QUERY_PROMPT

    from embed_server.config import EmbedderSettings as settings_class

    task = settings_class.model_fields["EMBED_QUERY_TASK"].default
    assert f"Instruct: {task}\nQuery:" == QWEN_QUERY_PROMPT
