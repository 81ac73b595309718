"""Some of a source's items: the note save_note or save_url just wrote into the inbox, ingested
on its own before the tool answers (kb.app.remember), whatever else waits in the inbox.

A full build (a new collection, or an interrupted rebuild) still lists all of the source's prose,
as any run would: a collection is never marked complete holding one note of many. Code items
are never listed (they go to the code collection, which the next sync fills).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from kb.content.formats import PROSE, domain_of
from kb.content.notes import Note
from kb.core.kinds import Domain
from kb.sources.base import Item, Listing, Source


class Picked:
    """The prose items of `inner` named in `names` (a kb.sources.base.Source itself)."""

    def __init__(self, inner: Source, names: Collection[str]) -> None:
        self.inner = inner
        self.names = frozenset(names)
        self.root: Path = inner.root
        self.origin: str = inner.origin
        self.complete: bool = inner.complete
        self.domains: tuple[Domain, ...] = (PROSE,)  # only prose items are picked
        self.deletion_cause: str = inner.deletion_cause
        self.halts_on_bad_frontmatter: bool = inner.halts_on_bad_frontmatter
        self.local_listing: bool = inner.local_listing

    def listing(self, *, everything: bool) -> Listing:
        whole = self.inner.listing(everything=everything)

        def kept(source: str) -> bool:
            return domain_of(source) == PROSE and (everything or source in self.names)

        return Listing(
            [i for i in whole.items if kept(i.source)],
            [f for f in whole.failed if kept(f.source)],
            list(whole.ignored) if everything else [],
            dict(whole.skipped) if everything else {},
        )

    def read(self, item: Item, *, max_bytes: int) -> Note:
        return self.inner.read(item, max_bytes=max_bytes)

    def holds(self, source: str) -> bool:
        return self.inner.holds(source)

    def after_store(self, items: Sequence[Item]) -> list[OSError | None]:
        return self.inner.after_store(items)

    def finish(self) -> None:
        self.inner.finish()

    def refreshed_fields(self) -> dict[str, dict[str, object]]:
        return self.inner.refreshed_fields()

    def too_many_gone(self, gone: int, live: int) -> str:
        return self.inner.too_many_gone(gone, live)
