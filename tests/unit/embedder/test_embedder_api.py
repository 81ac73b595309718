"""The embedding API with the real MiniLM: its answers from the app in this process
(embedder_fixtures), and over real HTTP from `python embedder/app.py` what only the server
shows (a chunked body, its log, the OpenAI SDK end to end)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import openai
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL

DOCS = [
    "The cat sat on the warm windowsill all afternoon.",
    "Knead the dough, let it rise, then bake the bread in a hot oven.",
    "Shock waves form when the flow over a wing becomes supersonic.",
    "x",
    "Quarterly tax returns are due at the end of April. " * 6,
    "A kitten naps in the sun.",
]


@pytest.fixture
def api(embedder_transport: httpx.BaseTransport) -> Iterator[httpx.Client]:
    """A client of the embedder app in this process."""
    with httpx.Client(base_url=IN_PROCESS_EMBED_URL, transport=embedder_transport) as client:
        yield client


@pytest.fixture
def served(embedder_url: str) -> Iterator[httpx.Client]:
    """A client of the embedder process, over real HTTP."""
    with httpx.Client(base_url=embedder_url) as client:
        yield client


def post(http: httpx.Client, body: object, **kwargs: object) -> httpx.Response:
    return http.post("/v1/embeddings", json=body, timeout=60.0, **kwargs)


def embed(http: httpx.Client, texts: list[str], **extra: object) -> np.ndarray:
    response = post(http, {"input": texts, **extra})
    assert response.status_code == 200, response.text
    return np.array([item["embedding"] for item in response.json()["data"]], dtype=np.float32)


def assert_error(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code
    assert error["message"]
    return error


def test_health_reports_model_dimensions_and_token_limit(api: httpx.Client, minilm_path) -> None:
    body = api.get("/health").json()
    threads = body["query_engine"].pop("threads")  # queries on every thread while cores are free
    assert threads["small_pass_threads"] >= 1 and threads["one_thread_for_s"] >= 0
    for one in body["models"]:
        one["query_engine"].pop("threads")
    model = {
        "model": str(minilm_path),
        "dimensions": 384,
        "max_input_tokens": 256,  # MiniLM's sentence-transformers max_seq_length
        "dtype": "fp32",  # the test server sets EMBED_DTYPE=fp32
        "backend": "torch",  # and EMBED_BACKEND=torch
        "device": "cpu",
        "query_engine": {"backend": "torch", "dtype": "fp32", "instruction_tokens_reused": 0},
        "auto": None,  # both set explicitly: nothing measured
    }
    # one model served; no RERANK_MODEL
    assert body == {"status": "ok", **model, "models": [model], "rerank": None}


def test_response_has_the_openai_shape_in_input_order(api: httpx.Client, minilm_path) -> None:
    body = post(api, {"input": DOCS[:3], "model": str(minilm_path)}).json()
    assert body["object"] == "list"
    assert body["model"] == str(minilm_path)  # the model that answered
    assert [d["index"] for d in body["data"]] == [0, 1, 2]
    assert {d["object"] for d in body["data"]} == {"embedding"}
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 0
    vectors = np.array([d["embedding"] for d in body["data"]])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_single_string_input_gives_one_vector(api: httpx.Client) -> None:
    body = post(api, {"input": "just one"}).json()
    assert len(body["data"]) == 1 and len(body["data"][0]["embedding"]) == 384


def test_related_texts_score_higher_than_unrelated_ones(api: httpx.Client) -> None:
    cat, bread, shock, _, _, kitten = embed(api, DOCS)
    assert cat @ kitten > cat @ bread + 0.2
    assert cat @ kitten > cat @ shock + 0.2


def test_batched_and_one_by_one_embeddings_agree_in_order(api: httpx.Client) -> None:
    # Mixed lengths: the server sorts them into several micro-batches (1024-token budget).
    texts = [*DOCS, "word " * 400, "short", "medium length sentence about rivers and mountains"]
    batched = embed(api, texts)
    single = np.stack([embed(api, [t])[0] for t in texts])
    cosines = np.sum(batched * single, axis=1)
    assert cosines.min() >= 0.9999, cosines
    # Order preserved: every batched vector is closest to its own single embedding.
    assert list(np.argmax(batched @ single.T, axis=1)) == list(range(len(texts)))


def test_concurrent_requests_each_get_their_own_vectors(api: httpx.Client) -> None:
    expected = {t: embed(api, [t])[0] for t in DOCS}
    with ThreadPoolExecutor(max_workers=len(DOCS)) as pool:
        results = list(pool.map(lambda t: embed(api, [t, t[::-1]])[0], DOCS))
    for text, vector in zip(DOCS, results, strict=True):
        assert float(vector @ expected[text]) >= 0.9999


def test_long_input_is_truncated_and_usage_counts_embedded_tokens(api: httpx.Client) -> None:
    long_text = "river " * 1000
    body = post(api, {"input": [long_text, "river"]}).json()
    # 256 tokens for the truncated input ([CLS] ... [SEP]) plus 3 for "[CLS] river [SEP]".
    assert body["usage"]["prompt_tokens"] == 256 + 3
    truncated = embed(api, ["river " * 254])[0]  # 254 words + 2 special tokens = 256
    assert float(np.array(body["data"][0]["embedding"]) @ truncated) >= 0.9999


def test_base64_encoding_round_trips_to_the_float_vectors(api: httpx.Client) -> None:
    floats = embed(api, DOCS[:2])
    body = post(api, {"input": DOCS[:2], "encoding_format": "base64"}).json()
    decoded = np.stack(
        [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in body["data"]]
    )
    np.testing.assert_array_equal(decoded, floats)


def test_queries_and_documents_embed_alike_for_a_model_without_prompts(api: httpx.Client) -> None:
    doc = embed(api, ["bread recipe"])[0]
    query = embed(api, ["bread recipe"], input_type="query")[0]
    assert float(doc @ query) >= 0.9999


def test_dimensions_equal_to_the_model_size_are_accepted(api: httpx.Client) -> None:
    assert embed(api, ["a"], dimensions=384).shape == (1, 384)


def test_dimensions_are_rejected_for_a_model_without_matryoshka_training(
    api: httpx.Client,
) -> None:
    error = assert_error(post(api, {"input": "a", "dimensions": 128}), 422, "invalid_dimensions")
    assert error["param"] == "dimensions"
    assert "Matryoshka" in error["message"]


@pytest.mark.parametrize(
    ("body", "param"),
    [({"input": ""}, "input"), ({"input": []}, "input"), ({"input": ["a", ""]}, "input[1]")],
)
def test_empty_input_is_rejected_with_422(api: httpx.Client, body: dict, param: str) -> None:
    error = assert_error(post(api, body), 422, "empty_input")
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"input": [101, 2023, 102]}, "token-id arrays are not supported"),
        ({"input": [[101, 102]]}, "token-id arrays are not supported"),
        ({"input": 5}, "string or a list of strings"),
        ({"input": ["a", 5]}, "input.1"),
        ({"input": "a", "input_type": "passage"}, "input_type"),
        ({"input": "a", "encoding_format": "int8"}, "encoding_format"),
        ({"input": "a", "dimensions": 0}, "dimensions"),
        ({"text": "a"}, "input"),
        ([1, 2], "JSON object"),
    ],
)
def test_invalid_requests_get_422_in_the_error_envelope(
    api: httpx.Client, body: object, needle: str
) -> None:
    error = assert_error(post(api, body), 422, "invalid_request")
    assert needle in error["message"]


def test_a_body_that_is_not_json_gets_422(api: httpx.Client) -> None:
    response = api.post(
        "/v1/embeddings",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert_error(response, 422, "invalid_json")


def test_too_many_inputs_get_413(api: httpx.Client) -> None:
    error = assert_error(post(api, {"input": ["a"] * 2049}), 413, "too_many_inputs")
    assert "EMBED_MAX_INPUTS=2048" in error["message"]


def test_a_body_over_the_limit_gets_413_before_it_is_parsed(api: httpx.Client) -> None:
    body = json.dumps({"input": ["x" * 1024] * 8200}).encode()  # > 8 MiB
    response = api.post(
        "/v1/embeddings",
        content=body,
        headers={"content-type": "application/json"},
        timeout=60.0,
    )
    error = assert_error(response, 413, "body_too_large")
    assert "EMBED_MAX_BODY_BYTES" in error["message"]


def test_a_chunked_body_over_the_limit_gets_413(served: httpx.Client) -> None:
    def chunks():
        yield b'{"input": ["'
        for _ in range(9 * 1024):
            yield b"x" * 1024
        yield b'"]}'

    response = served.post(
        "/v1/embeddings",
        content=chunks(),
        headers={"content-type": "application/json"},
        timeout=60.0,
    )
    assert_error(response, 413, "body_too_large")


def test_unknown_paths_and_methods_answer_in_the_error_envelope(api: httpx.Client) -> None:
    assert_error(api.get("/v1/nothing"), 404, "not_found")
    assert_error(api.get("/v1/embeddings"), 405, "method_not_allowed")


def test_input_text_never_reaches_the_log(minilm_embedder, served: httpx.Client) -> None:
    secret = "my private diary entry about zanzibar-7781"
    embed(served, [secret])
    embed(served, [secret], input_type="query")
    assert "zanzibar-7781" not in minilm_embedder.log_tail(200_000)


def test_openai_sdk_embeds_with_its_default_base64_encoding(
    embedder_url: str, served: httpx.Client, minilm_path
) -> None:
    client = openai.OpenAI(base_url=f"{embedder_url}/v1", api_key="not-needed", max_retries=0)
    result = client.embeddings.create(model=str(minilm_path), input=DOCS[:3])
    vectors = np.array([d.embedding for d in result.data], dtype=np.float32)
    np.testing.assert_allclose(vectors, embed(served, DOCS[:3]), atol=1e-6)
    assert result.usage.total_tokens > 0
    query = client.embeddings.create(
        model=str(minilm_path), input="bread", extra_body={"input_type": "query"}
    ).data[0]
    assert len(query.embedding) == 384
    client.close()


def test_openai_sdk_raises_the_servers_error_message(embedder_url: str, minilm_path) -> None:
    client = openai.OpenAI(base_url=f"{embedder_url}/v1", api_key="not-needed", max_retries=0)
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.embeddings.create(model=str(minilm_path), input=[""])
    assert "input[0] is an empty string" in str(caught.value)
    with pytest.raises(openai.NotFoundError) as unknown:  # as OpenAI's own API answers
        client.embeddings.create(model="text-embedding-3-small", input="bread")
    assert unknown.value.code == "model_not_found"
    client.close()


def test_null_optional_fields_take_their_defaults(api: httpx.Client) -> None:
    nulls = {"input_type": None, "encoding_format": None, "dimensions": None}
    np.testing.assert_array_equal(embed(api, ["bread"], **nulls), embed(api, ["bread"]))


def test_models_endpoint_lists_the_served_model(api: httpx.Client, minilm_path) -> None:
    body = api.get("/v1/models").json()
    assert [m["id"] for m in body["data"]] == [str(minilm_path)]
