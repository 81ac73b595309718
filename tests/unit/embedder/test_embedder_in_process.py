"""The in-process embedder of the tests (embedder_fixtures): the host's client reaches the real
app through the transport it is given, and only through it."""

from __future__ import annotations

import math

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import make_settings

from kb.app.backend import Backend, embed_client
from kb.core.errors import EmbedError


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


def test_a_client_given_the_transport_gets_minilm_vectors_that_rank_related_text_first(
    tmp_path, embedder_transport: httpx.BaseTransport, minilm_path
) -> None:
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL)
    with embed_client(settings, transport=embedder_transport) as client:
        bread, recipe, shock = client.embed_documents(
            ["how to bake bread", "a recipe for a sourdough loaf", "a normal shock wave"]
        )
        assert client.model == str(minilm_path) and client.dimensions == 384 == len(bread)
    assert cosine(bread, recipe) > cosine(bread, shock) + 0.2


def test_the_backends_clients_both_reach_the_embedder_through_the_transport(
    tmp_path, embedder_transport: httpx.BaseTransport
) -> None:
    backend = Backend(make_settings(tmp_path, IN_PROCESS_EMBED_URL), embedder_transport)
    try:
        assert backend.client.health()["dimensions"] == 384
        assert len(backend.code_client.embed_query("a query")) == 384
    finally:
        backend.close()


def test_a_client_without_the_transport_cannot_reach_the_in_process_url(tmp_path) -> None:
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL, EMBED_RETRIES=0)
    with embed_client(settings) as client, pytest.raises(EmbedError, match="unreachable"):
        client.health()
