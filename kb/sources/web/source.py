"""The browsers' bookmarks (BOOKMARKS) as a source: each bookmarked web page one item (`kind:
web`), its article chunked like a Markdown note.

Each page's `source` is `web/<site>/<words of its path>-<hash>` and its `origin` is `web`. The
listing names every bookmark of every file (BOOKMARKS_FOLDERS: only those in these folders), so
each run is a full sync (kb.ingest.plan): a bookmark removed is soft-deleted
(`bookmark_removed`), one added back is restored as it was, with nothing embedded. The same page
bookmarked in two browsers (or twice) is one item (kb.sources.web.page.url_key): its folders and
tags are all kept, the first file's title wins.

A page is fetched (kb.sources.web.fetch) when it was never fetched, or last fetched more than
WEB_REFRESH_DAYS ago (its ETag / Last-Modified sent: an unchanged page is not downloaded again).
A page that changed is written again; its chunks that did not change keep their vectors (the
embedding cache, by content hash), so only what changed is embedded. A page that fails is a
failure naming its link and the reason, and is tried again by the next sync; what the index
held of it stays, and the other pages sync. A bookmarks file that cannot be read fails by name
and nothing of the pages is deleted that sync.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from kb.content.formats.base import FormatError
from kb.content.notes import Note, NoteError
from kb.core.kinds import PROSE, Domain
from kb.core.schema import BOOKMARK_REMOVED, folder_key
from kb.core.settings import Settings
from kb.core.state import State
from kb.sources.base import Failure, Item, Listing, SourceDefaults
from kb.sources.folder import claim_prefix
from kb.sources.kind import setting_paths
from kb.sources.web import WebSettings, bookmarks
from kb.sources.web.fetch import NOT_MODIFIED, Fetcher, FetchError, Limits
from kb.sources.web.page import PREFIX, Marks, Page, Pages, page_note, page_source, read_page

log = logging.getLogger(__name__)

PAGES_DIR = "pages"
FETCH_THREADS = 8  # sites fetched side by side; one site's pages one after another
NOT_WEB = "bookmarks that are no web page (bookmarklets, place: queries)"
OUTSIDE = "bookmarks outside BOOKMARKS_FOLDERS"


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Entry:
    url: str
    marks: Marks


@dataclass
class WebSource(SourceDefaults):
    """The BOOKMARKS files (see the module docstring)."""

    files: list[Path]
    root: Path  # STATE_DIR/web: the pages fetched (nothing of the user's)
    limits: Limits
    folders: tuple[str, ...] = ()  # BOOKMARKS_FOLDERS, as folder keys
    refresh_days: int = 30
    clock: Callable[[], datetime] = now
    fetcher: Callable[[Limits], Fetcher] = Fetcher  # tests allow their loopback server
    origin: str = PREFIX
    complete = True
    domains: ClassVar[tuple[Domain, ...]] = (PROSE,)  # a page's text (a PDF's too) is prose
    deletion_cause: ClassVar[str] = BOOKMARK_REMOVED  # why a page leaves the index
    local_listing: ClassVar[bool] = False  # listing fetches the pages due: its own sync guards it
    _listed: set[str] = field(default_factory=set, repr=False)
    _whole: bool = field(default=False, repr=False)  # every file was read
    _entries: dict[str, _Entry] = field(default_factory=dict, repr=False)  # by source

    @property
    def pages(self) -> Pages:
        return Pages(self.root / PAGES_DIR)

    def listing(self, *, everything: bool) -> Listing:
        listing = Listing()
        entries = self._bookmarks(listing)
        self._entries = entries
        self._listed = set(entries)
        pages = self.pages
        due_before = (self.clock() - timedelta(days=self.refresh_days)).isoformat()
        held: dict[str, Page] = {}
        due: list[str] = []
        for source, entry in entries.items():
            page = pages.get(entry.url)
            if page is not None:
                held[source] = page
            checked = page.checked_at or page.fetched_at if page is not None else ""
            if page is None or (self.refresh_days and checked <= due_before):
                due.append(source)
        for source, outcome in self._fetch(due, held).items():
            if isinstance(outcome, Page):
                pages.put(outcome)
                held[source] = outcome
            else:
                listing.failed.append(Failure(entries[source].url, outcome))
                held.pop(source, None)  # not listed: its stored points stay (holds)
        for source in entries:
            if source in held:
                listing.items.append(Item(source, pages.path(entries[source].url), source,
                                          pending=False))  # fmt: skip
        return listing

    def _bookmarks(self, listing: Listing) -> dict[str, _Entry]:
        """Every bookmark of every file, one entry per page, in file order."""
        entries: dict[str, _Entry] = {}
        self._whole = True
        outside = not_web = 0
        for path in self.files:
            try:
                found = bookmarks.read(path)
            except bookmarks.BookmarksError as exc:
                listing.failed.append(Failure(str(path), f"BOOKMARKS: {exc}"))
                self._whole = False
                continue
            not_web += found.not_web
            for mark in found.bookmarks:
                if self.folders and not self._inside(mark.folders):
                    outside += 1
                    continue
                try:
                    source = page_source(mark.url)
                except ValueError as exc:  # one bad address fails alone, by name
                    listing.failed.append(Failure(mark.url, f"not a valid web address ({exc})"))
                    continue
                entry = entries.get(source)
                if entry is None:
                    entries[source] = _Entry(mark.url, Marks(mark.title, (mark.folders,),
                                                             mark.tags))  # fmt: skip
                    continue
                seen = entry.marks
                entry.marks = Marks(
                    seen.title or mark.title,
                    tuple(dict.fromkeys((*seen.folders, mark.folders))),
                    tuple(dict.fromkeys((*seen.tags, *mark.tags))),
                )
        if not_web:
            listing.skipped[NOT_WEB] = not_web
        if outside:
            listing.skipped[OUTSIDE] = outside
        return entries

    def _inside(self, folders: tuple[str, ...]) -> bool:
        keys = [folder_key(name) for name in folders]
        paths = {"/".join(keys[i:j]) for i in range(len(keys)) for j in range(i + 1, len(keys) + 1)}
        return any(wanted in paths for wanted in self.folders)

    def _fetch(self, due: list[str], held: dict[str, Page]) -> dict[str, Page | str]:
        """Fetch the `due` pages, sites side by side: each a Page, or why it failed."""
        if not due:
            return {}
        by_site: dict[str, list[str]] = defaultdict(list)
        for source in due:
            by_site[source.split("/")[1]].append(source)
        stamp = self.clock().isoformat(timespec="seconds")
        out: dict[str, Page | str] = {}

        def site(sources: list[str]) -> None:
            for source in sources:
                out[source] = self._one(fetcher, self._entries[source].url, held.get(source),
                                        stamp)  # fmt: skip

        with self.fetcher(self.limits) as fetcher, ThreadPoolExecutor(FETCH_THREADS) as pool:
            list(pool.map(site, by_site.values()))
        failed = sum(1 for o in out.values() if not isinstance(o, Page))
        log.info("web: %d pages fetched, %d failed (tried again next sync)", len(out) - failed,
                 failed)  # fmt: skip
        return out

    @staticmethod
    def _one(fetcher: Fetcher, url: str, before: Page | None, stamp: str) -> Page | str:
        try:
            got = fetcher.fetch(url, etag=before.etag if before else None,
                                last_modified=before.last_modified if before else None)  # fmt: skip
            if got == NOT_MODIFIED:
                assert before is not None
                return replace(before, checked_at=stamp)
            assert not isinstance(got, str)
            page = read_page(got, url, stamp)
            if before is not None and page.same_text(before):  # no validators, same text
                return replace(page, fetched_at=before.fetched_at, checked_at=stamp)
            return page
        except FetchError as exc:
            return str(exc)
        except FormatError as exc:
            return exc.reason
        except Exception as exc:  # one page's reader failing never stops the sync of the rest
            log.exception("web: %s could not be read (a bug: please report it)", url)
            return f"could not be read ({type(exc).__name__}: {exc})"

    def read(self, item: Item, *, max_bytes: int) -> Note:
        entry = self._entries[item.source]
        page = self.pages.get(entry.url)
        if page is None:
            raise NoteError(entry.url, "its fetched page is gone from STATE_DIR; fetched next sync")
        return page_note(item.source, item.path, page, entry.marks)

    def holds(self, source: str) -> bool:
        """A sync that could not read every file holds every page it held."""
        return not self._whole or source in self._listed

    def after_store(self, items: Sequence[Item]) -> list[OSError | None]:
        return [None] * len(items)  # the bookmarks are only ever read

    def finish(self) -> None:
        pass

    def too_many_gone(self, gone: int, live: int) -> str:
        """The mass-deletion guard's words (kb.ingest.guard)."""
        return f"BOOKMARKS: {gone} of its {live} pages are no longer bookmarked"


def web_limits(settings: Settings) -> Limits:
    """The WEB_* limits every page fetch keeps to (BOOKMARKS pages, save_url)."""
    own = settings.of(WebSettings)
    types = tuple(t.strip().lower() for t in own.WEB_CONTENT_TYPES.split(",") if t.strip())
    return Limits(
        timeout=own.WEB_TIMEOUT,
        max_bytes=own.WEB_MAX_BYTES,
        max_redirects=own.WEB_MAX_REDIRECTS,
        content_types=types,
        robots=own.WEB_ROBOTS,
        allow_private=own.WEB_ALLOW_PRIVATE,
    )


def web_sources(settings: Settings, state: State, **options: Any) -> list[WebSource]:
    """The BOOKMARKS source (none when BOOKMARKS is empty; its files in order, without
    repeats); ConfigError when a NOTE_FOLDERS folder is named `web` (its notes' origin would
    be the pages'). `options`: WebSource's (tests: a clock, a fetcher)."""
    own = settings.of(WebSettings)
    paths = setting_paths(own.BOOKMARKS)
    if not paths:
        return []
    claim_prefix("BOOKMARKS", PREFIX, "pages", settings.NOTE_FOLDERS)
    wanted = tuple(k for k in (folder_key(f) for f in own.BOOKMARKS_FOLDERS.split(",")) if k)
    return [
        WebSource(paths, state.web_dir(), web_limits(settings), wanted,
                  own.WEB_REFRESH_DAYS, **options)
    ]  # fmt: skip
