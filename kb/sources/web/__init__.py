"""Web pages as items: the browsers' bookmarks synced as a source (source.py), each page fetched
within limits and never from the user's own network (fetch.py), its article kept as Markdown
(page.py, through kb.content.article), bookmark files of every browser read (bookmarks.py).

The kind (`KIND`) is declared here, its modules imported when a run builds its sources: finding
the kinds (kb.sources.registry) loads no HTTP client.
"""

from __future__ import annotations

from dataclasses import replace

from kb.core.schema import ORIGIN, WEB
from kb.core.settings import Settings
from kb.core.state import WEB_DIR_NAME, State
from kb.sources.base import Source
from kb.sources.kind import Kind, Payload, Shown


class Bookmarks(Kind):
    """The BOOKMARKS pages: each page an item of origin `web`, read back from what the index
    stored (a page saved with save_url is a note of the inbox, read from its file)."""

    name = WEB
    order = 3
    prefix = WEB  # kb.sources.web.page.PREFIX
    unseen = "no page of the BOOKMARKS files is named so (a page saved with save_url is a note)"
    setting = "BOOKMARKS"

    def build(self, settings: Settings, state: State) -> list[Source]:
        from kb.sources.web.source import web_sources

        return list(web_sources(settings, state))

    def owns(self, payload: Payload) -> bool:
        return payload.get(ORIGIN) == WEB

    def shown(self, settings: Settings) -> list[Shown]:
        """The bookmark files as one row, logged under STATE_DIR/web (where the pages are)."""
        logged = str(settings.STATE_DIR / WEB_DIR_NAME)
        return [replace(row, logged=logged) for row in super().shown(settings)]


KIND = Bookmarks()
