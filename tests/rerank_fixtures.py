"""Reranker fixtures: a tiny cross-encoder made offline from the packaged MiniLM weights (BERT
body and tokenizer, a new random one-logit head: real mechanics, meaningless relevance) and one
embedder process serving MiniLM embeddings and that reranker for the whole session."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from helpers import EmbedderProcess, wait_until


def build_tiny_cross_encoder(minilm: Path, folder: Path) -> Path:
    """A `BertForSequenceClassification` with one label: MiniLM's encoder, a seeded random head."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "newly initialised head" is the point here, not news
    try:
        torch.manual_seed(14)
        model = BertForSequenceClassification.from_pretrained(
            minilm, num_labels=1, local_files_only=True
        )
    finally:
        hf_logging.set_verbosity(verbosity)
    with torch.no_grad():  # a wide head, so passages get clearly different scores
        model.classifier.weight.normal_(0.0, 0.5)
        model.classifier.bias.zero_()
    model.eval().save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm, local_files_only=True).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_reranker_path(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> Path:
    return build_tiny_cross_encoder(minilm_path, tmp_path_factory.mktemp("tiny-reranker"))


def wait_reranker(server: EmbedderProcess) -> None:
    def ready() -> bool:
        rerank = httpx.get(f"{server.url}/health", timeout=5.0).json().get("rerank") or {}
        assert rerank.get("status") != "failed", f"{rerank}\n{server.log_tail()}"
        return rerank.get("status") == "ok"

    wait_until(ready, 120.0, "reranker ready")


@pytest.fixture(scope="session")
def rerank_embedder(start_embedder, minilm_path: Path, tiny_reranker_path: Path) -> EmbedderProcess:
    """MiniLM embeddings and the tiny reranker (fp32) in one real embedder process. A small
    token budget so a request of a few passages already splits into several micro-batches."""
    server = start_embedder(
        {
            "EMBED_MODEL": str(minilm_path),
            "RERANK_MODEL": str(tiny_reranker_path),
            "RERANK_DTYPE": "fp32",  # exact: these tests compare with transformers itself
            "EMBED_BATCH_TOKENS": "256",
            "RERANK_MAX_DOCUMENTS": "40",
        }
    )
    wait_reranker(server)
    return server


@pytest.fixture(scope="session")
def rerank_url(rerank_embedder: EmbedderProcess) -> str:
    return rerank_embedder.url
