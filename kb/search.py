"""Semantic search over the stored chunks, and the tags in use.

Shared by query.py and the MCP server, so both return the same fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kb.notes import normalise_tags
from kb.store import Store

if TYPE_CHECKING:
    from embed_client import EmbedClient

MAX_K = 100


@dataclass(frozen=True)
class Hit:
    """One matching chunk. Fields a point lacks (written by an older version) are empty/None."""

    text: str
    source: str | None
    score: float
    tags: list[str] = field(default_factory=list)
    topic: str | None = None
    document_date: str | None = None
    date_ingested: str | None = None
    chunk_index: int | None = None
    line_start: int | None = None  # locators: 1-based lines of the chunk in its note file
    line_end: int | None = None
    char_start: int | None = None  # character offsets of the chunk in its note file
    char_end: int | None = None

    @classmethod
    def from_payload(cls, score: float, payload: dict[str, Any]) -> Hit:
        def opt(key: str, kind: type) -> Any:
            value = payload.get(key)
            return value if isinstance(value, kind) and not isinstance(value, bool) else None

        tags = payload.get("tags")
        return cls(
            text=payload.get("text") if isinstance(payload.get("text"), str) else "",
            source=opt("source", str),
            score=float(score),
            tags=[t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
            topic=opt("topic", str),
            document_date=opt("document_date", str),
            date_ingested=opt("date_ingested", str),
            chunk_index=opt("chunk_index", int),
            line_start=opt("line_start", int),
            line_end=opt("line_end", int),
            char_start=opt("char_start", int),
            char_end=opt("char_end", int),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def search(
    store: Store,
    client: EmbedClient,
    query: str,
    k: int = 5,
    tags: Sequence[str] | str | None = None,
) -> list[Hit]:
    """The `k` chunks closest to `query`, optionally only from notes with any of `tags`.

    Tags are normalised like frontmatter tags ("Korean  Cuisine" finds "korean cuisine").
    Raises ValueError for an empty query or k outside 1..MAX_K, EmbedError when the embedder
    fails, StoreError (CollectionMissing, ModelMismatch, StoreUnavailable) from Qdrant.
    """
    if not query.strip():
        raise ValueError("query is empty")
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be between 1 and {MAX_K}, got {k}")
    wanted = normalise_tags(tags)
    store.check_model(client.model, client.dimensions)
    vector = client.embed_query(query)
    return [Hit.from_payload(m.score, m.payload) for m in store.query(vector, k, wanted or None)]


def list_tags(store: Store) -> list[tuple[str, int]]:
    """Every tag with the number of notes carrying it, most used first (CollectionMissing if
    nothing was ingested yet)."""
    store.require()
    return store.tag_counts()
