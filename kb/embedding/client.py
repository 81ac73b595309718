"""The one HTTP client to the embedder, shared by the host scripts and the MCP server.

Requests carry at most EMBED_BATCH_SIZE texts and EMBED_BATCH_SIZE x EMBED_MAX_CHARS characters;
connection errors, 429 and 503 are retried with bounded exponential backoff that honours
Retry-After; every vector is checked (dimension from /health, finite, non-zero norm). With a key
(EMBED_API_KEY) every request carries `Authorization: Bearer <key>`; a 401 says which setting.

It takes plain values; kb.app.backend.embed_client builds one from the settings. `transport`
(httpx's) replaces the network: tests hand it the embedder's app running in their own process.
"""

from __future__ import annotations

import array
import base64
import math
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from kb.core.errors import RERANK_DISABLED, RERANK_FAILED, EmbedError
from kb.embedding.languages import model_languages, parse_languages

QUERY_CACHE_S = 60.0  # how long a query's vector is reused
QUERY_CACHE_SIZE = 256  # queries remembered (a 1024-d vector is ~8 KB as floats)

RETRY_STATUSES = frozenset({429, 503})
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 30.0
# Retry only when the request surely did not run; a read timeout may mean it is still running.
_RETRY_TRANSPORT = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)


def _decode_base64(data: str) -> list[float]:
    values = array.array("f", base64.b64decode(data))
    if sys.byteorder != "little":  # the wire format is little-endian float32
        values.byteswap()
    return values.tolist()


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class EmbedClient:
    """The embedder at `url`. Defaults are the settings' defaults (EMBED_BATCH_SIZE,
    EMBED_MAX_CHARS, EMBED_TIMEOUT, EMBED_RETRIES, EMBED_API_KEY)."""

    def __init__(
        self,
        url: str,
        *,
        batch_size: int = 16,
        text_chars: int = 1500,
        timeout: float = 120.0,
        retries: int = 5,
        api_key: str = "",
        request_model: str = "",
        languages: str = "",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        # EMBED_LANGUAGES: the languages the default model covers, when not its
        # kb.embedding.languages.MODEL_LANGUAGES row (empty); checked here, when set
        self.languages = languages
        if languages:
            parse_languages(languages)
        # the model asked for by name (`model` in each request, OpenAI's convention); empty:
        # the embedder's default model (EMBED_MODEL)
        self.request_model = request_model
        self.batch_size = batch_size
        self.text_chars = text_chars
        self.timeout = timeout
        self.retries = retries
        self.calls = 0  # POST /v1/embeddings attempts made
        self.rerank_calls = 0  # POST /v1/rerank requests made
        # until when (monotonic) the embedder is taken to serve no reranker: it said so
        self._no_reranker_until = 0.0
        self._reranker_failure: str | None = None  # why it did not load (the embedder's words)
        self._health: dict[str, Any] | None = None
        # query text -> (when, vector): a query repeated within QUERY_CACHE_S skips the embedder
        self._queries: OrderedDict[str, tuple[float, list[float]]] = OrderedDict()
        self.api_key = api_key
        self.transport = transport  # None: httpx's own (the network)
        self._http = httpx.Client(
            base_url=self.url,
            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
            headers=auth_headers(api_key),
            transport=transport,
        )
        self._others: dict[str, EmbedClient] = {}  # `using`'s clients, by model
        self._owner = True  # False for a client made by `using`: it shares this one's HTTP

    # --- lifecycle -------------------------------------------------------------------
    def close(self) -> None:
        if self._owner:
            self._http.close()

    def using(self, model: str) -> EmbedClient:
        """A client asking this embedder for `model` by name, on this client's connection: the
        model a collection was built with, while the embedder's default is the one the index is
        being rebuilt for (kb.search.query; EMBED_PREVIOUS_MODEL). Itself for its own model."""
        if model in (self.request_model, "") or (
            not self.request_model and self._health and self._health.get("model") == model
        ):
            return self
        other = self._others.get(model)
        if other is None:
            other = EmbedClient.__new__(EmbedClient)
            other.__dict__.update(self.__dict__)
            other.request_model, other._owner, other.calls = model, False, 0
            other.languages = ""  # EMBED_LANGUAGES is the default model's
            other._queries, other._others = OrderedDict(), {}
            self._others[model] = other
        return other

    def serves(self, model: str) -> bool:
        """Whether the embedder serves `model` (its /health, read once)."""
        health = self._health or self.health()
        return any(entry.get("model") == model for entry in health.get("models") or [health])

    def serves_others(self) -> bool:
        """Whether the embedder serves a model besides this client's (EMBED_PREVIOUS_MODEL)."""
        health = self._health or self.health()
        return any(entry.get("model") != self.model for entry in health.get("models") or [health])

    def __enter__(self) -> EmbedClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- health ----------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """GET /health once: its JSON when ready, else EmbedError (503 while loading)."""
        try:
            response = self._http.get("/health")
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        if response.status_code != 200:
            raise self._http_error(response)
        body = response.json()
        if "model" not in body:  # an embedder with a key describes itself only to its holders
            raise key_refused(self.url, self.api_key)
        self._health = body
        return body

    def wait_ready(
        self, timeout: float = 120.0, stop: threading.Event | None = None
    ) -> dict[str, Any]:
        """Poll /health until the model is ready; EmbedError after `timeout` seconds, or once
        `stop` is set.

        A model that failed to load (500) does not recover by waiting: that raises at once.
        """
        deadline = time.monotonic() + timeout
        while True:
            if stop is not None and stop.is_set():
                raise EmbedError(f"stopped while waiting for the embedder at {self.url}")
            try:
                return self.health()
            except EmbedError as exc:
                if exc.status is not None and exc.status not in RETRY_STATUSES:
                    raise
                if time.monotonic() >= deadline:
                    raise EmbedError(
                        f"embedder at {self.url} not ready after {timeout:.0f}s: {exc.message}",
                        exc.status,
                        exc.code,
                    ) from None
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    @property
    def model(self) -> str:
        return str(self._served()["model"])

    @property
    def covered(self) -> frozenset[str] | None:
        """The languages this client's model covers (None: every one, or not known): its
        EMBED_LANGUAGES, else its row in kb.embedding.languages.MODEL_LANGUAGES."""
        return model_languages(self.model, self.languages)

    @property
    def dimensions(self) -> int:
        return int(self._served()["dimensions"])

    def _served(self) -> dict[str, Any]:
        """/health's entry for the model this client asks for (the default model's fields, or
        its `models` list's entry for `request_model`)."""
        health = self._health or self.health()
        if not self.request_model or self.request_model == health.get("model"):
            return health
        for entry in health.get("models") or []:
            if entry.get("model") == self.request_model:
                return entry
        served = ", ".join(str(m.get("model")) for m in health.get("models") or [health])
        raise EmbedError(
            f"embedder at {self.url} does not serve {self.request_model} (CODE_EMBED_MODEL); "
            f"it serves {served}: set its EMBED_CODE_MODEL to that model",
            code="model_not_found",
        )

    # --- embedding -------------------------------------------------------------------
    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order, sent in requests within the batch limits."""
        for index, text in enumerate(texts):
            if not isinstance(text, str) or not text:
                raise EmbedError(f"texts[{index}] is empty or not a string", code="empty_input")
        vectors: list[list[float]] = []
        for batch in self._batches(texts):
            vectors.extend(self._embed(batch, "document"))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """The query's vector; the same query again within QUERY_CACHE_S comes from memory (an
        assistant often repeats a search with other filters)."""
        if not isinstance(text, str) or not text:
            raise EmbedError("query is empty", code="empty_input")
        now = time.monotonic()
        cached = self._queries.get(text)
        if cached is not None and now - cached[0] < QUERY_CACHE_S:
            return list(cached[1])
        vector = self._embed([text], "query")[0]
        self._queries[text] = (now, vector)
        self._queries.move_to_end(text)
        while len(self._queries) > QUERY_CACHE_SIZE:
            self._queries.popitem(last=False)
        return list(vector)

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Query vectors for several phrasings of one search, in one request."""
        for index, text in enumerate(texts):
            if not isinstance(text, str) or not text:
                raise EmbedError(f"queries[{index}] is empty", code="empty_input")
        return self._embed(list(texts), "query") if texts else []

    def _batches(self, texts: Sequence[str]) -> Iterator[list[str]]:
        budget = self.batch_size * self.text_chars
        batch: list[str] = []
        chars = 0
        for text in texts:
            if batch and (len(batch) >= self.batch_size or chars + len(text) > budget):
                yield batch
                batch, chars = [], 0
            batch.append(text)  # a text over the budget goes alone; the server truncates it
            chars += len(text)
        if batch:
            yield batch

    def _embed(self, texts: list[str], input_type: str) -> list[list[float]]:
        payload: dict[str, Any] = {
            "input": texts,
            "input_type": input_type,
            "encoding_format": "base64",
        }
        if self.request_model:
            payload["model"] = self.request_model
        body = self._post(payload)
        dims = self.dimensions  # after the POST: it has waited out a loading model
        data = sorted(body.get("data", []), key=lambda item: item["index"])
        if [item["index"] for item in data] != list(range(len(texts))):
            raise EmbedError(
                f"embedder at {self.url} returned {len(data)} vectors for {len(texts)} inputs"
            )
        vectors = []
        for item in data:
            raw = item["embedding"]
            vector = _decode_base64(raw) if isinstance(raw, str) else [float(x) for x in raw]
            self._check(vector, dims, item["index"])
            vectors.append(vector)
        return vectors

    def _check(self, vector: list[float], dims: int, index: int) -> None:
        if len(vector) != dims:
            raise EmbedError(
                f"embedder at {self.url} returned {len(vector)} dimensions for input {index}, "
                f"expected {dims} (model changed? restart the client)"
            )
        if not all(math.isfinite(x) for x in vector):
            raise EmbedError(f"embedder at {self.url} returned a non-finite vector (input {index})")
        if math.fsum(x * x for x in vector) <= 1e-12:
            raise EmbedError(f"embedder at {self.url} returned a zero vector (input {index})")

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        attempt = 0
        while True:
            self.calls += 1
            delay = BACKOFF_BASE_S * 2**attempt
            try:
                response = self._http.post("/v1/embeddings", json=payload)
            except _RETRY_TRANSPORT as exc:
                error = self._unreachable(exc)
            except httpx.TransportError as exc:  # e.g. a read timeout: do not pile requests on
                raise self._unreachable(exc) from None
            else:
                if response.status_code == 200:
                    return response.json()
                error = self._http_error(response)
                if response.status_code not in RETRY_STATUSES:
                    raise error
                retry_after = _retry_after(response)
                delay = delay if retry_after is None else retry_after
            if attempt >= self.retries:
                raise error
            time.sleep(min(delay, BACKOFF_MAX_S))
            attempt += 1

    # --- reranking -------------------------------------------------------------------
    @property
    def reranker_off(self) -> bool:
        """The embedder said within the last QUERY_CACHE_S that it serves no reranker."""
        return time.monotonic() < self._no_reranker_until

    @property
    def reranker_failure(self) -> str | None:
        """While `reranker_off` because the configured reranker did not load: the embedder's
        reason (which says how to fix it)."""
        return self._reranker_failure if self.reranker_off else None

    def rerank(self, query: str, documents: Sequence[str], timeout: float) -> list[float]:
        """POST /v1/rerank once: the relevance of each document, in input order. No retry: a
        reranker that is loading or busy is skipped by the caller, not waited for. EmbedError
        (`code` rerank_disabled when the embedder serves none)."""
        payload = {"query": query, "documents": list(documents)}
        self.rerank_calls += 1
        try:
            response = self._http.post("/v1/rerank", json=payload, timeout=timeout)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        if response.status_code != 200:
            error = self._http_error(response)
            if error.code in (RERANK_DISABLED, RERANK_FAILED):  # asked again in a minute
                self._no_reranker_until = time.monotonic() + QUERY_CACHE_S
                self._reranker_failure = (
                    envelope_message(response) if error.code == RERANK_FAILED else None
                )
            raise error
        scores = [0.0] * len(documents)
        try:
            for item in response.json()["results"]:
                scores[int(item["index"])] = float(item["relevance_score"])
        except (ValueError, KeyError, TypeError, IndexError):
            raise EmbedError(f"embedder at {self.url} sent a malformed rerank answer") from None
        return scores

    # --- errors ----------------------------------------------------------------------
    def _unreachable(self, exc: httpx.TransportError) -> EmbedError:
        detail = str(exc) or type(exc).__name__
        return EmbedError(f"embedder at {self.url} unreachable: {detail}")

    def _http_error(self, response: httpx.Response) -> EmbedError:
        return http_error(self.url, response, self.api_key)


def auth_headers(api_key: str) -> dict[str, str]:
    """The header that carries EMBED_API_KEY (none without a key)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def key_refused(url: str, api_key: str) -> EmbedError:
    """The embedder wants EMBED_API_KEY and did not get it (or got another one)."""
    if api_key:
        message = "EMBED_API_KEY is not the key the embedder expects (its EMBED_API_KEY)"
    else:
        message = "the embedder requires a key: set EMBED_API_KEY to the embedder's key"
    return EmbedError(
        f"embedder at {url} refused the request (401): {message}", 401, "invalid_api_key"
    )


def reranker_failure(health: dict[str, Any]) -> str | None:
    """Why the reranker an embedder's /health answer lists did not load (None: it serves one,
    loads it, or has none configured)."""
    rerank = health.get("rerank")
    if isinstance(rerank, dict) and rerank.get("status") == "failed":
        return str(rerank.get("error") or "it did not load")
    return None


def envelope_message(response: httpx.Response) -> str | None:
    """The message of an embedder's error envelope, as it wrote it."""
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return None


def http_error(url: str, response: httpx.Response, api_key: str = "") -> EmbedError:
    """EmbedError from an error answer of the embedder at `url` (its envelope's message); a 401
    names EMBED_API_KEY instead, whatever the server said."""
    if response.status_code == 401:
        return key_refused(url, api_key)
    code = None
    try:
        error = response.json()["error"]
        message, code = str(error["message"]), error.get("code")
    except (ValueError, KeyError, TypeError):
        message = response.text[:200] or response.reason_phrase
    return EmbedError(
        f"embedder at {url} answered {response.status_code}: {message}", response.status_code, code
    )
