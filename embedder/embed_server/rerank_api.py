"""`POST /v1/rerank` in the shape rerank clients speak (Cohere/Jina), on the embedder's engine.

`{model?, query, documents: [str], top_n?, return_documents?}` ->
`{results: [{index, relevance_score, document?}], model, usage}`, best first. Same error
envelope, limits and batching as /v1/embeddings: 422 for empty input, 413 for more than
RERANK_MAX_DOCUMENTS documents, 429 when the queue is full, 503 while the reranker loads. With
RERANK_MODEL empty the route answers 404 `rerank_disabled` and /health shows `rerank: null`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from embed_server.batching import Engine, QueueFull, start_engine
from embed_server.config import EmbedderSettings
from embed_server.errors import APIError, ModelLoadError, internal_error, not_served

log = logging.getLogger("embedder.rerank")

LOADING_RETRY_AFTER_S = 2
BUSY_RETRY_AFTER_S = 1


class RerankRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # e.g. Cohere's max_chunks_per_doc

    query: str = Field(description="The question the documents are ranked for.")
    documents: list[str] = Field(description="Texts to rank (Cohere's string form).")
    model: str | None = Field(
        None, description="RERANK_MODEL, or absent; another name is refused (404)."
    )
    top_n: int | None = Field(None, ge=1, description="Return only the best N (default all).")
    return_documents: bool | None = Field(None, description="Echo each document's text.")


def load_reranker(settings: EmbedderSettings) -> Any:
    from embed_server.rerank import (
        Reranker,  # torch is imported in the loader thread, not at startup
    )

    return Reranker(settings)


class RerankService:
    """The reranker's state: off (no RERANK_MODEL), loading, ready, or failed with a reason.

    It loads after the embedding model and never blocks it: embeddings are served whatever
    happens here. /health stays 503 (model_loading) until it has loaded, so a healthcheck never
    calls ready a service whose /v1/rerank still answers 503; a failed load is reported under
    `rerank` (/health 200: embeddings work, and search runs without reranking).
    """

    def __init__(self, settings: EmbedderSettings, loader: Callable[[EmbedderSettings], Any]):
        self.settings = settings
        self.loader = loader
        self.reranker: Any = None
        self.engine: Engine | None = None
        self.error: str | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.settings.RERANK_MODEL)

    def load(self) -> None:
        if not self.enabled:
            return
        try:
            self.reranker, self.engine = start_engine(
                lambda: self.loader(self.settings), "reranker",
                batch_tokens=self.settings.EMBED_BATCH_TOKENS,
                queue_size=self.settings.EMBED_QUEUE_SIZE,
                max_round_inputs=self.settings.RERANK_MAX_DOCUMENTS,
            )  # fmt: skip
        except ModelLoadError as exc:
            self.error = str(exc)

    @property
    def loading(self) -> bool:
        return self.enabled and self.engine is None and self.error is None

    def health(self) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        status = "ok" if self.engine else "failed" if self.error else "loading"
        report: dict[str, Any] = {"model": self.settings.RERANK_MODEL, "status": status}
        if self.error:
            report["error"] = self.error
        if self.reranker is not None:
            report["max_input_tokens"] = self.reranker.max_input_tokens
            report["dtype"] = self.reranker.dtype
        return report

    def require_ready(self) -> Engine:
        if self.engine is not None:
            return self.engine
        if not self.enabled:
            raise APIError(
                404,
                "no reranker is served: set RERANK_MODEL (a folder or a hub id baked into the "
                "image) to enable /v1/rerank",
                code="rerank_disabled",
            )
        if self.error is not None:
            raise APIError(500, self.error, type="server_error", code="model_load_failed")
        raise APIError(
            503,
            f"reranker {self.settings.RERANK_MODEL} is loading; retry shortly",
            type="service_unavailable",
            code="model_loading",
            retry_after=LOADING_RETRY_AFTER_S,
        )

    def close(self) -> None:
        if self.engine is not None:
            self.engine.stop()


def _validate(request: RerankRequest, settings: EmbedderSettings) -> None:
    if request.model is not None and request.model != settings.RERANK_MODEL:
        raise not_served(request.model, [settings.RERANK_MODEL])
    if not request.query.strip():
        raise APIError(422, "query must not be empty", code="empty_input", param="query")
    if not request.documents:
        raise APIError(422, "documents must not be empty", code="empty_input", param="documents")
    if len(request.documents) > settings.RERANK_MAX_DOCUMENTS:
        raise APIError(
            413,
            f"{len(request.documents)} documents exceed RERANK_MAX_DOCUMENTS="
            f"{settings.RERANK_MAX_DOCUMENTS} per request",
            code="too_many_documents",
            param="documents",
        )
    for index, text in enumerate(request.documents):
        if not text:
            param = f"documents[{index}]"
            raise APIError(422, f"{param} is an empty string", code="empty_input", param=param)


def install_rerank(app: FastAPI, settings: EmbedderSettings, service: RerankService) -> None:
    """Add POST /v1/rerank to `app`, served by `service`."""

    @app.post("/v1/rerank")
    async def rerank(request: RerankRequest) -> JSONResponse:
        engine = service.require_ready()
        _validate(request, settings)
        from embed_server.rerank import relevance  # loaded already: the engine exists

        started = time.perf_counter()
        pairs = [(request.query, doc) for doc in request.documents]
        try:
            future = engine.submit(pairs)  # type: ignore[arg-type]  # pairs, see rerank.Reranker
        except QueueFull:
            raise APIError(
                429,
                f"embedder busy: {settings.EMBED_QUEUE_SIZE} requests already waiting; retry",
                type="overloaded_error",
                code="queue_full",
                retry_after=BUSY_RETRY_AFTER_S,
            ) from None
        try:
            result = await asyncio.wrap_future(future)
        except Exception:
            log.exception("reranking %d documents failed", len(pairs))
            raise internal_error() from None
        scores = relevance(result.vectors[:, 0])
        # Stable sort on the negated score: ties keep input order.
        order = sorted(range(len(pairs)), key=lambda i: -scores[i])[: request.top_n]
        tokens = sum(result.token_counts)
        log.info(
            "reranked %d documents, %d tokens, %.0f ms",
            len(pairs),
            tokens,
            1000 * (time.perf_counter() - started),
        )
        results = []
        for i in order:
            item: dict[str, Any] = {"index": i, "relevance_score": float(scores[i])}
            if request.return_documents:
                item["document"] = {"text": request.documents[i]}
            results.append(item)
        return JSONResponse(
            {
                "results": results,
                "model": settings.RERANK_MODEL,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )
