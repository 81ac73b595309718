"""HTTP surface of the embedding service: OpenAI-style `POST /v1/embeddings`, `GET /health`,
and `POST /v1/rerank` when RERANK_MODEL is set (rerank_api.py).

Started by embedder/app.py (`uv run embedder/app.py`, the container's CMD). The model loads in a
background thread after the port opens, so `/health` answers 503
with Retry-After until a real forward pass has succeeded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import numpy as np
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from embed_server.auth import KeyMiddleware, key_given
from embed_server.batching import Encoder, Engine, QueueFull, start_engine
from embed_server.config import EmbedderSettings
from embed_server.errors import (
    APIError,
    BodyLimitMiddleware,
    ModelLoadError,
    install_error_handlers,
    internal_error,
    not_served,
)
from embed_server.hosts import HostMiddleware, allowed_hosts
from embed_server.rerank_api import RerankService, install_rerank, load_reranker

log = logging.getLogger("embedder")

LOADING_RETRY_AFTER_S = 2
BUSY_RETRY_AFTER_S = 1
MATRYOSHKA_MIN_DIM = 32  # Qwen3-Embedding's smallest supported output size


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # e.g. OpenAI's `user`

    input: str | list[str] = Field(description="Text or list of texts to embed.")
    # null is accepted wherever a default exists, as OpenAI's API does.
    input_type: Literal["document", "query"] | None = Field(
        None, description="`query` adds the model's query instruction (Qwen3); default document."
    )
    model: str | None = Field(
        None,
        description="The served model to use (EMBED_MODEL or EMBED_CODE_MODEL, as /v1/models "
        "lists them); absent: EMBED_MODEL. Another name is refused (404 model_not_found).",
    )
    encoding_format: Literal["float", "base64"] | None = Field(None, description="Default float.")
    dimensions: int | None = Field(None, ge=1, description="Matryoshka truncation (Qwen3).")

    @field_validator("input", mode="before")
    @classmethod
    def _strings_only(cls, value: Any) -> Any:
        if not isinstance(value, str | list):
            raise ValueError("input must be a string or a list of strings")
        # OpenAI clients may send tiktoken ids; they mean nothing in this model's vocabulary.
        if isinstance(value, list) and value and isinstance(value[0], int | list):
            raise ValueError(
                "token-id arrays are not supported: send strings (LangChain: set "
                "check_embedding_ctx_length=False)"
            )
        return value


def load_encoder(settings: EmbedderSettings) -> Encoder:
    # Imported here so the port opens (and /health says "loading") before torch is imported.
    from embed_server.model import Embedder

    return Embedder(settings)


class Service:
    """Model state shared by the routes: loading -> ready, or failed with a reason.

    A failed load keeps the process up: /health (500) and every request then say why, where a
    crash would become a silent restart loop in the container.
    """

    def __init__(self, settings: EmbedderSettings, loader: Callable[[EmbedderSettings], Encoder]):
        self.settings = settings
        self.loader = loader
        self.encoder: Any = None
        self.engine: Engine | None = None
        # queries' own engine, when auto loaded one for them (autotune.split_queries)
        self.query_engine: Engine | None = None
        self.error: str | None = None

    def load(self) -> None:
        limits = {
            "batch_tokens": self.settings.EMBED_BATCH_TOKENS,
            "queue_size": self.settings.EMBED_QUEUE_SIZE,
            "max_round_inputs": self.settings.EMBED_MAX_INPUTS,
        }
        try:
            encoder, engine = start_engine(lambda: self.loader(self.settings), "model", **limits)
        except ModelLoadError as exc:
            self.error = str(exc)
            return
        second = getattr(encoder, "query_encoder", None)
        if second is not None:
            self.query_engine = Engine(second, **limits)
            self.query_engine.start()
        self.encoder, self.engine = encoder, engine  # ready: both engines run

    def engine_for(self, input_type: str | None) -> Engine:
        engine = self.require_ready()
        return self.query_engine if input_type == "query" and self.query_engine else engine

    def require_ready(self) -> Engine:
        if self.engine is not None:
            return self.engine
        if self.error is not None:
            raise APIError(500, self.error, type="server_error", code="model_load_failed")
        raise APIError(
            503,
            f"model {self.settings.EMBED_MODEL} is loading; retry shortly",
            type="service_unavailable",
            code="model_loading",
            retry_after=LOADING_RETRY_AFTER_S,
        )

    def close(self) -> None:
        for engine in (self.engine, self.query_engine):
            if engine is not None:
                engine.stop()


def _validate(request: EmbeddingRequest, settings: EmbedderSettings, encoder: Any) -> list[str]:
    texts = [request.input] if isinstance(request.input, str) else request.input
    if not texts:
        raise APIError(422, "input must not be empty", code="empty_input", param="input")
    if len(texts) > settings.EMBED_MAX_INPUTS:
        raise APIError(
            413,
            f"{len(texts)} inputs exceed EMBED_MAX_INPUTS={settings.EMBED_MAX_INPUTS} per request",
            code="too_many_inputs",
            param="input",
        )
    for index, text in enumerate(texts):
        if not text:
            param = "input" if isinstance(request.input, str) else f"input[{index}]"
            raise APIError(422, f"{param} is an empty string", code="empty_input", param=param)
    dims = request.dimensions
    if dims is not None and dims != encoder.dimensions:
        if not encoder.matryoshka:
            raise APIError(
                422,
                f"model {encoder.name} has {encoder.dimensions} dimensions and was not trained "
                "for Matryoshka truncation; omit dimensions",
                code="invalid_dimensions",
                param="dimensions",
            )
        if not MATRYOSHKA_MIN_DIM <= dims <= encoder.dimensions:
            raise APIError(
                422,
                f"dimensions must be between {MATRYOSHKA_MIN_DIM} and {encoder.dimensions} "
                f"for {encoder.name}",
                code="invalid_dimensions",
                param="dimensions",
            )
    prompt = encoder.prompt(request.input_type or "document")
    return [prompt + text for text in texts] if prompt else texts


def _encode_vector(vector: np.ndarray, fmt: str) -> list[float] | str:
    if fmt == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.tolist()


def served_models(settings: EmbedderSettings) -> list[str]:
    """EMBED_MODEL, then EMBED_CODE_MODEL and EMBED_PREVIOUS_MODEL when they name other models
    (one load per model)."""
    served = [settings.EMBED_MODEL]
    for extra in (settings.EMBED_CODE_MODEL, settings.EMBED_PREVIOUS_MODEL):
        if extra and extra not in served:
            served.append(extra)
    return served


def pick(services: dict[str, Service], model: str | None) -> Service:
    """The service a request's `model` names (absent: the default, EMBED_MODEL). Any other
    name is refused as OpenAI's API refuses one: 404 model_not_found, here naming the served
    models, so a client never gets vectors of another model than the one it asked for."""
    if model is None:
        return next(iter(services.values()))
    if model in services:
        return services[model]
    raise not_served(model, list(services))


def create_app(
    settings: EmbedderSettings | None = None,
    loader: Callable[[EmbedderSettings], Encoder] = load_encoder,
) -> FastAPI:
    settings = settings or EmbedderSettings()
    reranking = RerankService(settings, load_reranker)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        services = {
            name: Service(settings.model_copy(update={"EMBED_MODEL": name}), loader)
            for name in served_models(settings)
        }
        app.state.services = services
        app.state.service = services[settings.EMBED_MODEL]  # the default model

        def load_all() -> None:  # one after the other: two loads would compete for memory
            for one in services.values():
                one.load()
            reranking.load()  # after the embedders: search needs those first

        threading.Thread(target=load_all, name="model-loader", daemon=True).start()
        yield
        for one in services.values():
            one.close()
        reranking.close()

    app = FastAPI(title="embedder", lifespan=lifespan)
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.EMBED_MAX_BODY_BYTES)
    # Without the key nothing else runs, not even the body read.
    app.add_middleware(KeyMiddleware, key=settings.EMBED_API_KEY)
    # Outermost: a request under another host name (DNS rebinding) reaches nothing.
    app.add_middleware(HostMiddleware, hosts=allowed_hosts(settings))
    install_health(app, settings, reranking)
    install_embeddings(app, settings)
    install_rerank(app, settings, reranking)
    return app


def _described(name: str, one: Service) -> dict[str, Any]:
    encoder = one.encoder
    queries = getattr(encoder, "query_encoder", None) or encoder
    return {
        "model": name,
        "dimensions": encoder.dimensions,
        "max_input_tokens": encoder.max_input_tokens,
        "dtype": encoder.dtype,  # the precision in use (EMBED_DTYPE=auto resolved)
        "backend": getattr(encoder, "backend", "torch"),  # EMBED_BACKEND resolved
        "device": str(encoder.device),
        # the engine queries run on (another one when auto measured it faster for them)
        "query_engine": {
            "backend": getattr(queries, "backend", "torch"),
            "dtype": queries.dtype,
            # query instruction tokens whose keys and values every query reuses (0: none)
            "instruction_tokens_reused": getattr(queries, "instruction_tokens", 0),
            # threads a query runs on now, and the CPU share the last one got (null: not torch
            # on CPU; embed_server.threads)
            "threads": _threads_state(queries),
        },
        # what EMBED_BACKEND=auto, EMBED_DTYPE=auto measured and chose, and why (null:
        # an explicit setting or a GPU)
        "auto": getattr(encoder, "decision", None),
    }


def _threads_state(encoder: Any) -> dict[str, object] | None:
    guard = getattr(encoder, "pass_threads", None)
    if guard is None or getattr(encoder, "onnx", None) is not None or encoder.device.type != "cpu":
        return None
    state: dict[str, object] = guard.state()
    return state


def install_health(app: FastAPI, settings: EmbedderSettings, reranking: RerankService) -> None:
    """`GET /health` and `GET /v1/models`."""

    @app.get("/health")
    async def health(request: Request) -> dict[str, Any]:
        services: dict[str, Service] = app.state.services
        for one in services.values():
            try:
                one.require_ready()
                if reranking.loading:  # ready means every configured model answers: 503 until then
                    reranking.require_ready()
            except APIError as exc:
                if key_given(request):
                    raise
                # the messages name the model (a folder of this machine) and why it failed
                raise APIError(exc.status, "not ready", type=exc.type, code=exc.code,
                               retry_after=exc.retry_after) from None  # fmt: skip
        if not key_given(request):
            return {"status": "ok"}  # EMBED_API_KEY is set: the rest is for its holders
        primary = _described(settings.EMBED_MODEL, app.state.service)
        # every model served, the default first (OpenAI clients pick one by `model`)
        models = [_described(name, one) for name, one in services.items()]
        # rerank null: RERANK_MODEL is empty
        return {"status": "ok", **primary, "models": models, "rerank": reranking.health()}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        # Some OpenAI-compatible tools list models before embedding.
        data = [{"id": name, "object": "model", "owned_by": "local"} for name in app.state.services]
        return {"object": "list", "data": data}


def install_embeddings(app: FastAPI, settings: EmbedderSettings) -> None:
    """`POST /v1/embeddings`."""

    @app.post("/v1/embeddings")
    async def embeddings(request: EmbeddingRequest) -> JSONResponse:
        service = pick(app.state.services, request.model)
        return JSONResponse(await embed(service, request, settings))


async def embed(
    service: Service, request: EmbeddingRequest, settings: EmbedderSettings
) -> dict[str, Any]:
    """The body of `POST /v1/embeddings` for the model `service` serves."""
    engine = service.engine_for(request.input_type)
    texts = _validate(request, settings, service.encoder)
    started = time.perf_counter()
    try:
        future = engine.submit(texts)
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
        log.exception("embedding %d inputs failed", len(texts))
        raise internal_error() from None
    vectors = result.vectors
    if request.dimensions is not None and request.dimensions < vectors.shape[1]:
        vectors = vectors[:, : request.dimensions]
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    tokens = sum(result.token_counts)
    log.info(
        "embedded %d %s inputs, %d tokens, %.0f ms",
        len(texts),
        request.input_type or "document",
        tokens,
        1000 * (time.perf_counter() - started),
    )
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": _encode_vector(v, request.encoding_format or "float"),
        }
        for i, v in enumerate(vectors)
    ]
    return {
        "object": "list",
        "data": data,
        "model": service.settings.EMBED_MODEL,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def main() -> int:
    try:
        settings = EmbedderSettings()
    except ValidationError as exc:  # one line naming each bad setting, no traceback
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc']))}: {str(err['msg']).removeprefix('Value error, ')}"
            for err in exc.errors()
        )
        print(f"error: embedder settings: {problems}", file=sys.stderr)
        return 2
    level = settings.LOG_LEVEL.upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    debug = level == "DEBUG"
    # A quiet console at INFO: no line per request (health polls while the model loads made
    # hundreds), and uvicorn's start and stop chatter only at DEBUG (the model's lines say it).
    quiet = max(logging.getLevelNamesMapping()[level], logging.WARNING)
    logging.getLogger("uvicorn.error").setLevel(logging.DEBUG if debug else quiet)
    # Ctrl-C or SIGTERM: uvicorn shuts down, then raises the signal again; SIGTERM's default
    # would end the process by signal, so it raises KeyboardInterrupt as Ctrl-C does: status 0
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.run(
            create_app(settings),
            host=settings.EMBED_HOST,
            port=settings.EMBED_PORT,
            log_config=None,  # our root logger format for uvicorn's messages too
            access_log=debug,
            timeout_graceful_shutdown=10,
        )
    return 0
