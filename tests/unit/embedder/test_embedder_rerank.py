"""POST /v1/rerank over real HTTP: a real embedder process serving MiniLM and a tiny
cross-encoder (MiniLM's body, a random one-logit head), checked against transformers itself."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import httpx
import numpy as np
import pytest
from test_embedder_api import assert_error

QUERY = "how do shock waves form over a wing"
DOCS = [
    "Shock waves form when the flow over a wing becomes supersonic.",
    "Knead the dough, let it rise, then bake the bread in a hot oven.",
    "The cat sat on the warm windowsill all afternoon.",
    "Boundary layer separation behind a shock raises drag. " * 3,
    "Tomatoes need full sun and regular water.",
    "x",
]


def rerank(url: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}/v1/rerank", json=body, timeout=60.0)


def direct_scores(folder: Path, query: str, docs: list[str], max_length: int = 512) -> np.ndarray:
    """The model's own relevance for each document: transformers, no service in between."""
    import torch
    from helpers import torch_threads_kept
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    with torch_threads_kept():
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
        batch = tokenizer(
            [query] * len(docs), docs, padding=True, truncation=True, max_length=max_length,
            return_tensors="pt",
        )  # fmt: skip
        with torch.inference_mode():
            logits = model(**batch).logits[:, 0].double().numpy()
    return 1 / (1 + np.exp(-logits))


def test_results_follow_the_models_own_scores_best_first(
    rerank_url: str, tiny_reranker_path: Path
) -> None:
    named = {"query": QUERY, "documents": DOCS, "model": str(tiny_reranker_path)}
    body = rerank(rerank_url, named).json()
    expected = direct_scores(tiny_reranker_path, QUERY, DOCS)
    indices = [r["index"] for r in body["results"]]
    assert indices == list(np.argsort(-expected, kind="stable"))
    got = np.array([r["relevance_score"] for r in body["results"]])
    np.testing.assert_allclose(got, expected[indices], atol=1e-5)
    assert len(set(np.round(got, 4))) > 3  # the random head still separates the passages
    assert body["model"] == str(tiny_reranker_path)
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > len(DOCS)
    assert all("document" not in r for r in body["results"])


def test_a_reranker_not_served_is_refused_by_name(rerank_url: str, tiny_reranker_path) -> None:
    refused = rerank(rerank_url, {"query": QUERY, "documents": DOCS, "model": "rerank-v3.5"})
    assert refused.status_code == 404, refused.text
    error = refused.json()["error"]
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert f"served: {tiny_reranker_path}" in error["message"]


def test_batched_scores_equal_one_by_one_scores(rerank_url: str) -> None:
    # 256 padded tokens per wave: these split into several micro-batches of mixed lengths.
    docs = [*DOCS, "pressure " * 200, "heat transfer in a boundary layer", *DOCS[:3]]
    together = rerank(rerank_url, {"query": QUERY, "documents": docs}).json()["results"]
    by_index = {r["index"]: r["relevance_score"] for r in together}
    for i, doc in enumerate(docs):
        alone = rerank(rerank_url, {"query": QUERY, "documents": [doc]}).json()["results"]
        assert alone[0]["index"] == 0
        assert alone[0]["relevance_score"] == pytest.approx(by_index[i], abs=1e-5)


def test_top_n_keeps_the_best_and_return_documents_echoes_their_text(rerank_url: str) -> None:
    full = rerank(rerank_url, {"query": QUERY, "documents": DOCS}).json()["results"]
    body = rerank(
        rerank_url,
        {"query": QUERY, "documents": DOCS, "top_n": 2, "return_documents": True},
    ).json()
    assert [r["index"] for r in body["results"]] == [r["index"] for r in full[:2]]
    assert [r["document"] for r in body["results"]] == [
        {"text": DOCS[r["index"]]} for r in full[:2]
    ]


def test_a_passage_past_the_token_limit_is_cut_not_refused(rerank_url: str) -> None:
    body = rerank(rerank_url, {"query": QUERY, "documents": ["wing " * 3000]}).json()
    # RERANK_MAX_TOKENS (512) and MiniLM's 512 positions: the pair is cut to 512 tokens.
    assert body["usage"]["total_tokens"] == 512
    assert 0.0 < body["results"][0]["relevance_score"] < 1.0


@pytest.mark.parametrize(
    ("body", "status", "code", "param"),
    [
        ({"query": "", "documents": ["a"]}, 422, "empty_input", "query"),
        ({"query": "q", "documents": []}, 422, "empty_input", "documents"),
        ({"query": "q", "documents": ["a", ""]}, 422, "empty_input", "documents[1]"),
        ({"query": "q", "documents": ["a"] * 41}, 413, "too_many_documents", "documents"),
        ({"query": "q", "documents": "a"}, 422, "invalid_request", "documents"),
        ({"query": "q", "documents": ["a"], "top_n": 0}, 422, "invalid_request", "top_n"),
        ({"documents": ["a"]}, 422, "invalid_request", "query"),
    ],
    ids=["empty-query", "no-documents", "empty-document", "too-many", "not-a-list", "top-n-0",
         "no-query"],
)  # fmt: skip
def test_bad_requests_get_the_error_envelope(
    rerank_url: str, body: dict, status: int, code: str, param: str
) -> None:
    error = assert_error(rerank(rerank_url, body), status, code)
    assert error["param"] == param


def test_health_lists_the_reranker(rerank_url: str, tiny_reranker_path: Path) -> None:
    rerank_health = httpx.get(f"{rerank_url}/health").json()["rerank"]
    assert rerank_health == {
        "model": str(tiny_reranker_path),
        "status": "ok",
        "max_input_tokens": 512,
        "dtype": "fp32",
    }


def test_an_int8_reranker_keeps_the_models_order_and_health_says_int8(
    start_embedder, minilm_path: Path, tiny_reranker_path: Path
) -> None:
    from rerank_fixtures import wait_reranker

    server = start_embedder(
        {"EMBED_MODEL": str(minilm_path), "RERANK_MODEL": str(tiny_reranker_path),
         "RERANK_DTYPE": "int8", "RERANK_MAX_TOKENS": "256"}
    )  # fmt: skip
    wait_reranker(server)
    health = httpx.get(f"{server.url}/health").json()["rerank"]
    assert health["dtype"] == "int8" and health["max_input_tokens"] == 256
    docs = [*DOCS, "Supersonic flow over a swept wing and the shock it forms. " * 40]
    body = rerank(server.url, {"query": QUERY, "documents": docs}).json()
    expected = direct_scores(tiny_reranker_path, QUERY, docs, max_length=256)  # fp32
    got = {r["index"]: r["relevance_score"] for r in body["results"]}
    # int8 moves each score a little (this random head's logits are near-tied, so relatively a
    # lot: bench/research/rerank_fidelity.py), not the order of clear gaps: a passage ranked above
    # another never scores clearly below it in fp32.
    tolerance = 0.08
    assert max(abs(got[i] - expected[i]) for i in got) < tolerance
    indices = [r["index"] for r in body["results"]]
    for above, below in itertools.pairwise(indices):
        assert expected[above] > expected[below] - 2 * tolerance, (above, below)
    assert body["usage"]["total_tokens"] < 256 * len(docs)  # the long passage is cut to 256


def test_without_rerank_model_health_says_null_and_the_route_says_how_to_enable_it(
    embedder_url: str,
) -> None:
    assert httpx.get(f"{embedder_url}/health").json()["rerank"] is None
    error = assert_error(rerank(embedder_url, {"query": "q", "documents": ["a"]}), 404,
                         "rerank_disabled")  # fmt: skip
    assert "RERANK_MODEL" in error["message"]


def test_a_model_that_is_no_cross_encoder_is_refused_and_embeddings_keep_working(
    start_embedder, tiny_qwen3_path: Path
) -> None:
    # The tiny Qwen3 (a bare Qwen3Model, no classification head) as both models: loads fast.
    model = str(tiny_qwen3_path)
    server = start_embedder({"EMBED_MODEL": model, "RERANK_MODEL": model})

    def settled() -> dict:
        return httpx.get(f"{server.url}/health").json()["rerank"]

    from helpers import wait_until

    # 503 while the reranker loads; a failed reranker leaves /health 200 (embeddings work)
    wait_until(lambda: httpx.get(f"{server.url}/health").status_code == 200, 60.0, "load settled")
    health = settled()
    assert health["status"] == "failed"
    assert "RERANK_MODEL" in health["error"] and "sequence-classification" in health["error"]
    error = assert_error(rerank(server.url, {"query": "q", "documents": ["a"]}), 500,
                         "model_load_failed")  # fmt: skip
    assert "sequence-classification" in error["message"]
    ok = httpx.post(f"{server.url}/v1/embeddings", json={"input": ["still here"]}, timeout=60)
    assert ok.status_code == 200


def test_health_is_503_while_the_configured_reranker_loads_and_200_once_it_answers(
    minilm_path: Path, tiny_reranker_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A container's healthcheck must not call the service ready while /v1/rerank answers 503.
    from helpers import free_port, serve_in_thread, torch_threads_kept, wait_until

    from embed_server import api as app
    from embed_server import config, model
    from embed_server import rerank as rerank_module

    released = threading.Event()

    def held_reranker(settings: object) -> object:  # the real one, once the test lets it load
        released.wait(120.0)
        return rerank_module.Reranker(settings)

    monkeypatch.setattr(app, "load_reranker", held_reranker)
    port = free_port()  # the app answers its own port only (its Host check)
    settings = config.EmbedderSettings(
        _env_file=None, EMBED_MODEL=str(minilm_path), RERANK_MODEL=str(tiny_reranker_path),
        RERANK_DTYPE="fp32", EMBED_DTYPE="fp32", EMBED_THREADS=1, EMBED_PORT=port,
    )  # fmt: skip
    body = {"query": QUERY, "documents": DOCS[:2]}
    app_under_test = app.create_app(settings, model.Embedder)
    with torch_threads_kept(), serve_in_thread(app_under_test, port=port) as url:
        try:

            def embeds() -> bool:
                response = httpx.post(f"{url}/v1/embeddings", json={"input": "a"}, timeout=60)
                return response.status_code == 200

            wait_until(embeds, 120.0, "the embedding model serving")
            health = httpx.get(f"{url}/health")
            assert health.status_code == 503 and int(health.headers["retry-after"]) >= 1
            error = health.json()["error"]
            assert error["code"] == "model_loading"
            assert error["message"].startswith(f"reranker {tiny_reranker_path} is loading")
            assert rerank(url, body).status_code == 503
        finally:
            released.set()
        wait_until(lambda: httpx.get(f"{url}/health").status_code == 200, 120.0, "reranker ready")
        # (/v1/rerank itself is checked on real processes above: its module is imported by
        # name at the first request, which an in-process app cannot do here)
        assert httpx.get(f"{url}/health").json()["rerank"]["status"] == "ok"
