"""Never embed the same text twice: document vectors kept by content hash.

The key is sha256 of (model, dimensions, the exact text embedded — chunk plus its title/topic
context), so an edited note re-embeds only the chunks whose embedded text changed, and a
re-created collection (a rebuild for a new model layout, a deleted Qdrant volume) re-embeds
nothing that was embedded before. (Whole unchanged notes never get this far: kb.ingest.run skips
them by their stored fingerprint.)

Why a local SQLite file rather than reading vectors back from Qdrant: a re-created collection has
lost the vectors exactly when they are most needed, a lookup by key is O(1)
where embedded Qdrant scans every point to filter on a payload field, and it works unchanged
against a remote cluster. It lives in the state folder (`STATE_DIR/embed-cache.sqlite3`, see
kb.core.state) and costs about 4 KB per 1024-d chunk. Deleting it is always safe: the next ingest
simply embeds again.
"""

from __future__ import annotations

import hashlib
import sqlite3
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

_LOOKUP_CHUNK = 500  # keys per SELECT: well under SQLite's bound-parameter limit


class DocumentEmbedder(Protocol):
    @property
    def model(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...


def content_key(model: str, dimensions: int, text: str) -> str:
    return hashlib.sha256(f"{model}\0{dimensions}\0{text}".encode()).hexdigest()


class EmbedCache:
    """Document vectors by content key in a SQLite file (`path=None`: no caching)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.hits = 0  # texts served from the cache (ingest summaries and benchmarks report it)
        self._db: sqlite3.Connection | None = None
        if path is not None:
            self._db = sqlite3.connect(path)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)"
            )
            self._db.commit()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> EmbedCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, keys: Sequence[str]) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        if self._db is None:
            return found
        unique = list(dict.fromkeys(keys))
        for i in range(0, len(unique), _LOOKUP_CHUNK):
            part = unique[i : i + _LOOKUP_CHUNK]
            rows = self._db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(part))})",
                part,
            )
            for key, blob in rows:
                vec = array("f")
                vec.frombytes(blob)
                found[key] = vec.tolist()
        return found

    def _put(self, items: dict[str, list[float]]) -> None:
        if self._db is None or not items:
            return
        self._db.executemany(
            "INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)",
            [(key, array("f", vec).tobytes()) for key, vec in items.items()],
        )
        self._db.commit()

    def known(self, client: DocumentEmbedder, texts: Sequence[str]) -> list[list[float]] | None:
        """Vectors for `texts` in order when the cache holds every one (counted as hits), else
        None: nothing to embed for them, so ingest writes them whole at once."""
        keys = [content_key(client.model, client.dimensions, t) for t in texts]
        found = self._get(keys)
        if any(k not in found for k in keys):
            return None
        self.hits += len(keys)
        return [found[k] for k in keys]

    def embed_documents(self, client: DocumentEmbedder, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for `texts` in order; only texts never embedded by this model hit `client`."""
        keys = [content_key(client.model, client.dimensions, t) for t in texts]
        found = self._get(keys)
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        self.hits += sum(1 for k in keys if k in found)
        if missing:
            vectors = client.embed_documents(list(missing.values()))
            fresh = dict(zip(missing, vectors, strict=True))
            self._put(fresh)
            found |= fresh
        return [found[k] for k in keys]
