"""The embedder serves EMBED_MODEL and EMBED_CODE_MODEL side by side, picked by a request's
`model` field; the host's code client asks for its model by name."""

from __future__ import annotations

import httpx
import pytest

from kb.core.errors import EmbedError
from kb.embedding.client import EmbedClient


@pytest.fixture(scope="module")
def two_models(start_embedder, minilm_path, tiny_qwen3_path) -> str:
    env = {"EMBED_MODEL": str(minilm_path), "EMBED_CODE_MODEL": str(tiny_qwen3_path)}
    return start_embedder(env).url


def test_health_lists_both_models_and_requests_pick_one_by_name(
    two_models, minilm_path, tiny_qwen3_path
):
    health = httpx.get(f"{two_models}/health").json()
    assert health["model"] == str(minilm_path)  # the default model, as before
    dims = {m["model"]: m["dimensions"] for m in health["models"]}
    assert list(dims) == [str(minilm_path), str(tiny_qwen3_path)]
    assert dims[str(minilm_path)] == 384 and dims[str(tiny_qwen3_path)] != 384
    listed = httpx.get(f"{two_models}/v1/models").json()["data"]
    assert [m["id"] for m in listed] == list(dims)
    for name, size in dims.items():
        body = httpx.post(f"{two_models}/v1/embeddings", json={"input": "x", "model": name})
        assert body.json()["model"] == name and len(body.json()["data"][0]["embedding"]) == size
    default = httpx.post(f"{two_models}/v1/embeddings", json={"input": "x"}).json()
    assert default["model"] == str(minilm_path)
    unknown = httpx.post(f"{two_models}/v1/embeddings", json={"input": "x", "model": "gpt-x"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"
    assert str(tiny_qwen3_path) in unknown.json()["error"]["message"]


def test_the_code_client_embeds_with_the_model_it_names(two_models, tiny_qwen3_path):
    with EmbedClient(two_models, request_model=str(tiny_qwen3_path)) as code:
        assert code.model == str(tiny_qwen3_path)
        assert len(code.embed_documents(["def f(): pass"])[0]) == code.dimensions != 384
    wrong = EmbedClient(two_models, request_model="not-served")
    with wrong, pytest.raises(EmbedError, match=r"does not serve not-served.*EMBED_CODE_MODEL"):
        _ = wrong.model


def test_one_model_named_twice_is_loaded_once(embedder_url, minilm_path):
    # the session's MiniLM embedder: EMBED_CODE_MODEL empty
    health = httpx.get(f"{embedder_url}/health").json()
    assert [m["model"] for m in health["models"]] == [str(minilm_path)]
    named = {"input": "x", "model": str(minilm_path)}
    body = httpx.post(f"{embedder_url}/v1/embeddings", json=named)
    assert body.status_code == 200 and body.json()["model"] == str(minilm_path)


@pytest.mark.parametrize("name", ["any", "text-embedding-3-small", "", "MODEL"])
def test_a_model_not_served_is_refused_as_openai_does_even_with_one_model(
    embedder_url, minilm_path, name
):
    # OpenAI answers an unknown model with 404 model_not_found; the message names what is here
    refused = httpx.post(f"{embedder_url}/v1/embeddings", json={"input": "x", "model": name})
    assert refused.status_code == 404, refused.text
    error = refused.json()["error"]
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert error["type"] == "invalid_request_error"
    assert f"served: {minilm_path}" in error["message"]
    absent = httpx.post(f"{embedder_url}/v1/embeddings", json={"input": "x", "model": None})
    assert absent.status_code == 200 and absent.json()["model"] == str(minilm_path)
