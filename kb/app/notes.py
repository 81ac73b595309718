"""One way to reach the notes per process, chosen once at start-up (`open_notes`).

Embedded storage (QDRANT_PATH) opens in one process at a time. While an MCP server holds it,
announced in STATE_DIR/server.json (kb.app.handoff), a script reaches the notes through that
server (kb.app.remote.RemoteNotes: its tools, a JSON-RPC call each, its hand-off routes for
what changes the index); otherwise in this process (LocalNotes: kb.search and kb.ingest on the
storage, opened here on first use). Every operation of query.py and ingest.py goes through the
one `Notes` chosen, so no option can miss the server, and nothing falls back from one to the
other later. Modules load lazily: a search through the server never imports Qdrant's client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from kb.app import handoff
from kb.core.settings import Settings

if TYPE_CHECKING:
    from kb.app.backend import Backend
    from kb.ingest.lifecycle import DeletedNote
    from kb.ingest.options import IngestOptions
    from kb.ingest.progress import Summary
    from kb.search import SearchRequest
    from kb.search.filters import Filters
    from kb.search.read import Passage
    from kb.search.related import Related
    from kb.search.rerank import Reranked
    from kb.store.points import Store

Say = Callable[[str], None]


class Notes(Protocol):
    """What the scripts do with the notes; each raises a KbError naming what failed."""

    settings: Settings

    def search(self, request: SearchRequest) -> Reranked: ...

    def related(self, source: str, k: int) -> Related: ...

    def why(
        self, source: str, query: str | None, filters: Filters, per_note: int | None
    ) -> dict[str, Any]: ...

    def read(self, source: str, start_line: int) -> Passage: ...

    def ingest(self, options: IngestOptions, say: Say) -> Summary:
        """One run under the ingest lock; a run already holding it is joined (`say` tells its
        progress) and this one follows. IngestError, with what was done, when it stops."""
        ...

    def ingest_saved(self, write: Callable[[], str], say: Say) -> str:
        """`write` (under the ingest lock) puts a note in the inbox; it is then indexed on its
        own. The line saying what was saved."""
        ...

    def delete(self, source: str, *, hard: bool) -> list[str]:
        """Soft-delete (hard: delete for good) a note: the names changed (none: already so)."""
        ...

    def restore(self, source: str) -> bool: ...

    def purge(self, older_than_days: int) -> list[str]: ...

    def list_deleted(self) -> list[DeletedNote]: ...

    def evaluate(self, limit: int, paraphrase: bool) -> dict[str, Any] | None:
        """eval.py's measure on the index (kb.app.evaluate.measure)."""
        ...

    def close(self) -> None: ...


def open_notes(settings: Settings) -> Notes:
    """The server holding this process's embedded storage, when one is announced and alive;
    else this process."""
    server = handoff.running(settings) if settings.QDRANT_PATH else None
    if server is not None:
        from kb.app.remote import RemoteNotes

        return RemoteNotes(settings, server)
    from kb.app.backend import Backend

    return LocalNotes(Backend(settings), index=True)


class LocalNotes:
    """The notes in this process: `backend`'s store and clients (opened on first use).
    `index`: build embedded storage's search index after an ingest (a script; a server builds
    it at start)."""

    def __init__(self, backend: Backend, *, index: bool = False) -> None:
        self.backend = backend
        self.settings = backend.settings
        self.index = index

    def search(self, request: SearchRequest) -> Reranked:
        from kb.search import search

        return search(self.backend.searcher(), request)

    def related(self, source: str, k: int) -> Related:
        from kb.search.related import related

        return related(self.backend.store(), source, k)

    def why(
        self, source: str, query: str | None, filters: Filters, per_note: int | None
    ) -> dict[str, Any]:
        from dataclasses import asdict

        from kb.app.why import why_not_found

        found = why_not_found(self.settings, self.backend.searcher(), source, query, filters,
                              per_note)  # fmt: skip
        return asdict(found)

    def read(self, source: str, start_line: int) -> Passage:
        from kb.app.backend import read_config
        from kb.search.read import read_item

        stores = [self.backend.store(), self.backend.code_store()]
        return read_item(read_config(self.settings), stores, source, start_line=start_line)

    def ingest(self, options: IngestOptions, say: Say) -> Summary:
        from kb.app.ingest import run
        from kb.core.state import State
        from kb.store import optimize

        with State(self.settings.STATE_DIR).lock(joining=say):
            summary = run(self.settings, self.backend.client, self.backend.store(), options)
            stopped = options.stop is not None and options.stop.is_set()
            if self.index and not stopped:  # embedded storage: its index, off the search path
                names = [self.settings.COLLECTION, self.settings.CODE_COLLECTION]
                optimize.after_ingest(self.backend.store(), names, written=summary.written, say=say)
        return summary

    def ingest_saved(self, write: Callable[[], str], say: Say) -> str:
        from kb.app import remember
        from kb.core.state import State

        with State(self.settings.STATE_DIR).lock(joining=say):
            saved = remember.ingest_saved(
                self.settings, self.backend.client, self.backend.store(), write()
            )
        return f"saved {saved.file}: {saved.title} ({saved.passages} passages)"

    def delete(self, source: str, *, hard: bool) -> list[str]:
        from kb.ingest import lifecycle

        with self._locked() as store:
            if hard:
                return lifecycle.hard_delete(store, [source])
            return [source] if lifecycle.soft_delete(store, source) else []

    def restore(self, source: str) -> bool:
        from kb.ingest import lifecycle

        with self._locked() as store:
            return lifecycle.restore(store, source)

    def purge(self, older_than_days: int) -> list[str]:
        from kb.ingest import lifecycle

        with self._locked() as store:
            return lifecycle.purge(store, older_than_days)

    def list_deleted(self) -> list[DeletedNote]:
        from kb.ingest import lifecycle

        return lifecycle.list_deleted(self.backend.store())

    @contextmanager
    def _locked(self) -> Iterator[Store]:
        """The store, under the ingest lock (a change to the index waits for a running one)."""
        from kb.core.state import State

        with State(self.settings.STATE_DIR).lock(joining=lambda line: None):
            yield self.backend.store()

    def evaluate(self, limit: int, paraphrase: bool) -> dict[str, Any] | None:
        from kb.app.evaluate import measure

        return measure(self.settings, self.backend.searcher(), limit, paraphrase)

    def close(self) -> None:
        self.backend.close()
