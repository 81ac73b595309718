"""Web pages as items: the browsers' bookmarks synced as a source (source.py), each page fetched
within limits and never from the user's own network (fetch.py), its article kept as Markdown
(page.py, through kb.content.article), bookmark files of every browser read (bookmarks.py).

The kind (`KIND`) is declared here, its modules imported when a run builds its sources: finding
the kinds (kb.sources.registry) loads no HTTP client.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field, model_validator

from kb.core.schema import WEB
from kb.core.settings import SOURCE, KindSettings, Settings
from kb.core.state import WEB_DIR_NAME, State
from kb.sources.base import Source
from kb.sources.kind import Kind, Shown


class WebSettings(KindSettings):
    """The bookmarks' and every page fetch's settings (docs/guide/web.md)."""

    BOOKMARKS: str = Field(
        "",
        description="Comma-separated browser bookmark files synced as a source (each page one "
        "item, results under web/<site>/): Chromium/Chrome/Edge/Brave `Bookmarks`, Firefox "
        "`places.sqlite`, or an exported bookmarks HTML.",
        json_schema_extra=SOURCE,
    )
    BOOKMARKS_FOLDERS: str = Field(
        "",
        description="Comma-separated bookmark folders to sync (e.g. read later; any depth, any "
        "case); empty: every bookmark.",
    )
    WEB_REFRESH_DAYS: int = Field(
        30,
        ge=0,
        description="Days after which a bookmarked page is fetched again (only what changed is "
        "embedded); 0: never.",
    )
    WEB_TIMEOUT: float = Field(
        20.0,
        gt=0,
        description=(
            "Seconds one page's fetch may take in all (robots.txt, redirects, headers and body)."
        ),
    )
    WEB_MAX_BYTES: int = Field(
        10_000_000,
        ge=1,
        description="Pages larger than this (bytes, on the wire or decoded) are not fetched.",
    )
    WEB_MAX_REDIRECTS: int = Field(
        5, ge=0, description="Redirects a fetch follows at most (each one checked like the first)."
    )
    WEB_CONTENT_TYPES: str = Field(
        "text/html,application/xhtml+xml,application/pdf,text/plain",
        description="Comma-separated media types fetched: HTML (main text extracted), PDF, plain "
        "text; others are refused.",
    )
    WEB_ROBOTS: bool = Field(
        True, description="Honour a site's robots.txt: a page it disallows is not fetched."
    )
    WEB_ALLOW_PRIVATE: bool = Field(
        False,
        description="Fetch pages on loopback or private addresses (this machine, your own "
        "network); off: refused, redirects and DNS answers included.",
    )

    @model_validator(mode="after")
    def _web_content_types(self) -> WebSettings:
        known = {"text/html", "application/xhtml+xml", "application/pdf", "text/plain"}
        for kind in (t.strip().lower() for t in self.WEB_CONTENT_TYPES.split(",") if t.strip()):
            if kind not in known:
                raise ValueError(
                    f"WEB_CONTENT_TYPES: {kind!r} is not a type a page is read as (known: "
                    f"{', '.join(sorted(known))})"
                )
        return self


class Bookmarks(Kind):
    """The BOOKMARKS pages: each page an item of origin `web`, read back from what the index
    stored (a page saved with save_url is a note of the inbox, read from its file)."""

    name = WEB
    order = 3
    prefix = WEB  # kb.sources.web.page.PREFIX
    unseen = "no page of the BOOKMARKS files is named so (a page saved with save_url is a note)"
    setting = "BOOKMARKS"
    settings_model = WebSettings

    def build(self, settings: Settings, state: State) -> list[Source]:
        from kb.sources.web.source import web_sources

        return list(web_sources(settings, state))

    def shown(self, settings: Settings) -> list[Shown]:
        """The bookmark files as one row, logged under STATE_DIR/web (where the pages are)."""
        logged = str(settings.STATE_DIR / WEB_DIR_NAME)
        return [replace(row, logged=logged) for row in super().shown(settings)]


KIND = Bookmarks()
