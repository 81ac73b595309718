"""One source seen by one collection: its prose items (notes, documents, tables, config) for
COLLECTION, its code items (code, notebooks) for CODE_COLLECTION (kb.content.formats.domain_of).

kb.ingest.run runs each source once per collection of its `domains`, through this view, so each
collection is synced, soft-deleted and rebuilt on its own with everything kb.ingest.run already
does. The views share one listing per run (a folder is walked once, for the mass-deletion guard
and both collections); files that are not items (ignored, skipped) are counted by the prose view
only. Everything else is the source's own (the view forwards every hook of the protocol).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kb.content.formats import PROSE, domain_of
from kb.content.notes import Note
from kb.core.kinds import Domain
from kb.sources.base import Item, Listing, Source


@dataclass
class Listed:
    """A source whose listing is made once per kind (everything or not) and shared."""

    source: Source
    _cache: dict[bool, Listing] = field(default_factory=dict)

    def listing(self, *, everything: bool) -> Listing:
        if everything not in self._cache:
            self._cache[everything] = self.source.listing(everything=everything)
        return self._cache[everything]


@dataclass
class DomainSource:
    """The items of `listed` whose domain is `domain` (a kb.sources.base.Source itself)."""

    listed: Listed
    domain: Domain

    @property
    def inner(self) -> Source:
        return self.listed.source

    @property
    def root(self) -> Path:
        return self.inner.root

    @property
    def origin(self) -> str:
        return self.inner.origin

    @property
    def complete(self) -> bool:
        return self.inner.complete

    def has_items(self, *, everything: bool) -> bool:
        """Whether the source lists any item of this domain."""
        return bool(self.listing(everything=everything).items)

    def listing(self, *, everything: bool) -> Listing:
        whole = self.listed.listing(everything=everything)
        prose = self.domain == PROSE
        return Listing(
            [i for i in whole.items if domain_of(i.source) == self.domain],
            [f for f in whole.failed if domain_of(f.source) == self.domain],
            list(whole.ignored) if prose else [],
            dict(whole.skipped) if prose else {},
            list(whole.skipped_paths) if prose else [],
        )

    def read(self, item: Item, *, max_bytes: int) -> Note:
        return self.inner.read(item, max_bytes=max_bytes)

    def holds(self, source: str) -> bool:
        return self.inner.holds(source)

    def after_store(self, items: Sequence[Item]) -> list[OSError | None]:
        return self.inner.after_store(items)

    def finish(self) -> None:
        self.inner.finish()

    @property
    def domains(self) -> tuple[Domain, ...]:
        return (self.domain,)

    @property
    def deletion_cause(self) -> str:
        return self.inner.deletion_cause

    @property
    def halts_on_bad_frontmatter(self) -> bool:
        return self.inner.halts_on_bad_frontmatter

    @property
    def local_listing(self) -> bool:
        return self.inner.local_listing

    def refreshed_fields(self) -> dict[str, dict[str, object]]:
        return self.inner.refreshed_fields()

    def too_many_gone(self, gone: int, live: int) -> str:
        return self.inner.too_many_gone(gone, live)
