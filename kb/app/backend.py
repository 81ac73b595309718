"""The one place that builds the embedder client and the store from the settings, what a
search reads (kb.search.Searcher, the rerank settings as plain values), the plain config of
reading (kb.search.read), and the lazy pair of client and store that long-running servers (the MCP
server and its dashboard) share.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path, PureWindowsPath
from typing import Any

import httpx

from kb.content import ocr
from kb.content.notes import normalise_tags
from kb.core.errors import EmbedError, StoreError
from kb.core.settings import Settings
from kb.embedding.client import EmbedClient, reranker_failure
from kb.search import RerankOptions, Searcher
from kb.search.read import Passage, read_item
from kb.search.rerank import unloaded
from kb.sources import registry
from kb.sources.kind import ReadConfig
from kb.store import collection
from kb.store.engine import ClusterLayout
from kb.store.points import Store


def embed_client(
    settings: Settings, *, code: bool = False, transport: httpx.BaseTransport | None = None
) -> EmbedClient:
    """The embedder client; `code`: the one for the code collection (CODE_EMBED_MODEL);
    `transport`: httpx's, instead of the network (EmbedClient)."""
    return EmbedClient(
        settings.EMBED_URL,
        batch_size=settings.EMBED_BATCH_SIZE,
        text_chars=settings.EMBED_MAX_CHARS,
        timeout=settings.EMBED_TIMEOUT,
        retries=settings.EMBED_RETRIES,
        api_key=settings.EMBED_API_KEY,
        request_model=settings.CODE_EMBED_MODEL if code else "",
        languages="" if code else settings.EMBED_LANGUAGES,  # the default model's
        transport=transport,
    )


def open_store(settings: Settings, collection_name: str | None = None) -> Store:
    """QDRANT_PATH (embedded) if set, else QDRANT_URL; StoreUnavailable when neither answers.

    A collection an older version left in embedded storage's old layout is carried over here,
    once (Store.carry_over): opening a store by itself never changes what is stored."""
    store = Store.open(
        collection_name or settings.COLLECTION,
        url=settings.QDRANT_URL,
        path=settings.QDRANT_PATH,
        api_key=settings.QDRANT_API_KEY,
        # how a new collection is spread over a cluster (kb.store.collection.create)
        cluster=ClusterLayout(
            shards=settings.QDRANT_SHARDS,
            replicas=settings.QDRANT_REPLICATION,
            write_consistency=settings.QDRANT_WRITE_CONSISTENCY,
        ),
    )
    try:
        store.carry_over()
    except BaseException:
        store.close()
        raise
    return store


def read_config(settings: Settings) -> ReadConfig:
    """Where read_note and query.py --show find an indexed item's file, and how to read it."""
    ocr.configure(settings.OCR, settings.STATE_DIR)  # an image is read back as ingest read it
    return ReadConfig(
        notes_dir=settings.NOTES_DIR,
        note_folders=settings.NOTE_FOLDERS,
        folders_git=settings.NOTE_FOLDERS_GIT,
        suffixes=settings.index_extensions,
        max_bytes=settings.NOTE_MAX_BYTES,
        private_tags=frozenset(normalise_tags(settings.PRIVATE_TAGS)),
        properties=settings.note_properties,
    )


def rerank_options(settings: Settings) -> RerankOptions:
    return RerankOptions(
        candidates=settings.RERANK_CANDIDATES,
        weight=settings.RERANK_WEIGHT,
        passage_chars=settings.RERANK_MAX_CHARS,
        timeout=settings.RERANK_TIMEOUT,
    )


def roots(settings: Settings) -> dict[str, Path]:
    """Where each source's notes are read from, by origin (kb.search.fresh): the inbox's
    ingested/ and every NOTE_FOLDERS folder (none while NOTE_FOLDERS does not parse), as each
    kind says (kb.sources.registry)."""
    return registry.files(settings)


def searcher(
    settings: Settings, store: Store, client: EmbedClient, code_client: EmbedClient
) -> Searcher:
    """What kb.search.search reads: the notes' `store`, the code collection beside it
    (CODE_COLLECTION, searched with `code_client`), the rerank settings and the notes' folders."""
    code = (store.beside(settings.CODE_COLLECTION), code_client)
    return Searcher(store, client, code, rerank_options(settings), roots(settings))


def embedder_message(exc: EmbedError) -> str:
    """Say what failed and what to do (relayed to the user by an assistant or a page)."""
    if exc.status == 503:
        return f"embedder failed: still loading, retry in a minute ({exc.message})"
    if exc.status is None:
        return f"embedder failed: {exc.message}; start the embedder and retry"
    return f"embedder failed: {exc.message}"


def model_name(model: object) -> object:
    """A model as /health shows it (no token asked): a local path by its last part only, so the
    answer names no folder of the machine; a model id (`Qwen/Qwen3-Embedding-0.6B`) as it is."""
    if isinstance(model, str) and re.match(r"[/~.\\]|[A-Za-z]:[/\\]", model):
        return PureWindowsPath(model).name or model
    return model


def reranker_problem(health: dict[str, Any]) -> str | None:
    """From the embedder's /health answer: the line to show while its reranker did not load."""
    failure = reranker_failure(health)
    return unloaded(failure) if failure else None


class Backend:
    """The embedder client and the store a server's requests share. The store opens on first
    use, so a server starts (and reports why in its health) while Qdrant or the storage folder
    is not available yet, and recovers without a restart once it is."""

    def __init__(self, settings: Settings, transport: httpx.BaseTransport | None = None) -> None:
        registry.check(settings)  # every kind's own settings: ConfigError naming a wrong one
        self.settings = settings
        self.client = embed_client(settings, transport=transport)
        self.code_client = embed_client(settings, code=True, transport=transport)
        self._store: Store | None = None
        self._code_store: Store | None = None
        self._code_beside: Store | None = None  # the store the code store shares an engine with
        self._lock = threading.Lock()

    def store(self) -> Store:
        with self._lock:
            if self._store is None:
                self._store = open_store(self.settings)
            return self._store

    def code_store(self) -> Store:
        """The code collection (CODE_COLLECTION), on the notes store's client."""
        store = self.store()
        with self._lock:
            if self._code_store is None or self._code_beside is not store:
                self._code_store = store.beside(self.settings.CODE_COLLECTION)
                self._code_beside = store
            return self._code_store

    def searcher(self) -> Searcher:
        """Both collections and the rerank settings (opens the store: StoreError if it cannot)."""
        return Searcher(
            self.store(),
            self.client,
            (self.code_store(), self.code_client),
            rerank_options(self.settings),
            roots(self.settings),
        )

    def read(self, source: str, start_line: int, lines: int) -> Passage:
        """Lines of an indexed item, as `read_note` and the notes' MCP resources return them
        (kb.search.read: the ingest's gates, private notes, redaction, invisible characters)."""
        stores = [self.store(), self.code_store()]
        return read_item(read_config(self.settings), stores, source, start_line, lines)

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = self._code_store = self._code_beside = None
        self.client.close()
        self.code_client.close()

    def reranker_problem(self) -> str | None:
        """The line to show while the embedder's configured reranker did not load (None too
        when the embedder cannot be asked: its own state is reported where it is shown)."""
        try:
            return reranker_problem(self.client.health())
        except EmbedError:
            return None

    def health(self) -> dict[str, Any]:
        """Embedder and store state (blocking: run it in a worker thread)."""
        embedder: dict[str, Any] = {"url": self.settings.EMBED_URL}
        try:
            info = self.client.health()
            embedder |= {
                "ready": True,
                "model": info.get("model"),
                "dimensions": info.get("dimensions"),
                "rerank": info.get("rerank"),  # null: no reranker served
            }
            if problem := reranker_problem(info):  # ready, but searches are not reranked
                embedder["problem"] = problem
        except EmbedError as exc:
            embedder |= {"ready": False, "error": embedder_message(exc)}
        store: dict[str, Any] = {"collection": self.settings.COLLECTION}
        try:
            found = collection.require(self.store())
            if embedder["ready"]:
                collection.check_model(self.store(), embedder["model"], embedder["dimensions"])
            store |= {"ready": True, "points": found.points, "model": model_name(found.model)}
        except StoreError as exc:
            store |= {"ready": False, "error": str(exc)}
        # the code collection is optional: it exists once code was ingested, and never fails health
        code: dict[str, Any] = {"collection": self.settings.CODE_COLLECTION}
        try:
            found_code = collection.info(self.code_store()) if store["ready"] else None
            code |= {"exists": found_code is not None}
            if found_code is not None:
                code |= {"points": found_code.points, "model": model_name(found_code.model)}
        except StoreError as exc:
            code |= {"exists": False, "error": str(exc)}
        ok = embedder["ready"] and store["ready"]
        if embedder.get("model") is not None:
            embedder["model"] = model_name(embedder["model"])
        return {"ok": ok, "embedder": embedder, "store": store, "code": code}
