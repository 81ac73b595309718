"""The host side's one error family: every failure a user can act on.

Each message says what failed and what to do about it; scripts print it as one `error: ...`
line and exit with the error's `exit_code` (kb.app.cli). Anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kb.ingest.progress import Summary


class KbError(Exception):
    """A failure the user can fix; `str(exc)` says how."""

    exit_code = 1


class ConfigError(KbError):
    """A setting is invalid (its name is in the message)."""

    exit_code = 2


RERANK_DISABLED = "rerank_disabled"  # EmbedError.code of an embedder that serves no reranker
RERANK_FAILED = "model_load_failed"  # ... and of one whose reranker did not load (its reason)


class EmbedError(KbError):
    """The embedder could not embed: unreachable, loading, overloaded, or it rejected the input."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status  # HTTP status; None when the embedder was not reached
        self.code = code  # the error envelope's `code`, e.g. "model_loading"


class StoreError(KbError):
    """Qdrant cannot do what was asked."""


class StoreUnavailable(StoreError):
    """The server is unreachable, or the embedded folder is held by another process."""


class CollectionMissing(StoreError):
    """The collection does not exist yet (nothing ingested)."""


class ModelMismatch(StoreError):
    """The collection was built by another embedding model or dimension."""


class KeywordIndexMissing(StoreError):
    """The collection was built by an older version, without keyword vectors."""


class IngestError(KbError):
    """The run stopped. `summary` says what it had finished (those notes are stored and moved)."""

    def __init__(self, message: str, summary: Summary | None = None) -> None:
        super().__init__(message)
        self.summary = summary


class IngestBusy(IngestError):
    """Another ingest holds the lock."""


class SaveError(KbError):
    """A note or web page could not be saved (kb.app.remember); str() says why."""


class NoteNotFound(KbError):
    """A lifecycle operation (kb.ingest.lifecycle) named a note the collection does not hold."""
