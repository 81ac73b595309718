"""The ingest as the settings say: what `ingest.py`, the dashboard's Sync, the watcher and the
MCP server's hand-off route run. The sources (the NOTES_DIR inbox, every NOTE_FOLDERS folder,
every YOUTUBE_PLAYLISTS playlist, the BOOKMARKS pages), the code collection's client and the
run's config are built here from the settings; kb.ingest.run runs them knowing no setting
and no kind of source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kb.app.backend import embed_client
from kb.content.notes import normalise_tags
from kb.core.errors import ConfigError, IngestError
from kb.core.schema import folder_key
from kb.core.settings import Settings
from kb.core.state import State
from kb.embedding.client import EmbedClient
from kb.ingest import run as ingest_run
from kb.ingest import switch
from kb.ingest.options import DEFAULTS, IngestConfig, IngestOptions
from kb.ingest.progress import RecordedProgress, Summary
from kb.sources.base import Source
from kb.sources.folder import FolderSource, configured, parse
from kb.sources.inbox import InboxSource
from kb.sources.web.fetch import Limits
from kb.sources.web.page import PREFIX as WEB
from kb.sources.web.source import WebSource
from kb.sources.youtube import playlist as youtube
from kb.sources.youtube.quota import Ledger
from kb.store.points import Store


def ingest_config(settings: Settings) -> IngestConfig:
    return IngestConfig(
        max_bytes=settings.NOTE_MAX_BYTES,
        group_chunks=settings.EMBED_BATCH_SIZE,
        cache=settings.EMBED_CACHE,
        max_delete=settings.NOTE_FOLDERS_MAX_DELETE,
        private_tags=frozenset(normalise_tags(settings.PRIVATE_TAGS)),
        old_cache_dir=settings.NOTES_DIR,
    )


def folders(settings: Settings) -> list[FolderSource]:
    """The NOTE_FOLDERS folders, checked (ConfigError naming the folder otherwise)."""
    return configured(
        settings.NOTES_DIR,
        settings.NOTE_FOLDERS,
        git=settings.NOTE_FOLDERS_GIT,
        suffixes=settings.index_extensions,
        properties=settings.note_properties,
    )


def inbox(settings: Settings, beside: list[FolderSource]) -> InboxSource:
    """NOTES_DIR as the inbox; no note of it may start with a folder's name of `beside`."""
    return InboxSource(
        settings.NOTES_DIR,
        reserved=[f.name for f in beside],
        suffixes=settings.index_extensions,
        properties=settings.note_properties,
    )


def youtube_config(settings: Settings) -> youtube.YoutubeConfig:
    return youtube.YoutubeConfig(
        playlists=settings.YOUTUBE_PLAYLISTS,
        api_url=settings.YOUTUBE_API_URL,
        api_key=settings.YOUTUBE_API_KEY,
        daily_units=settings.YOUTUBE_DAILY_UNITS,
        cookies_file=settings.YOUTUBE_COOKIES_FILE,
        cookies_browser=settings.YOUTUBE_COOKIES_BROWSER,
        captions=settings.YOUTUBE_CAPTIONS,
        captions_languages=settings.YOUTUBE_CAPTIONS_LANGUAGES,
        refresh_days=settings.YOUTUBE_REFRESH_DAYS,
    )


def playlists(
    settings: Settings,
    state: State,
    *,
    ledger: Ledger | None = None,
    video_info: Callable[[str], dict[str, Any]] | None = None,
    **api_options: Any,
) -> list[youtube.PlaylistSource]:
    """The YOUTUBE_PLAYLISTS playlists (kb.sources.youtube.playlist.configured); ConfigError
    when a folder or the inbox already names notes `youtube/...`, as the videos are named."""
    config = youtube_config(settings)
    if not youtube.parse(config.playlists):
        return []
    names = {name for name, _ in parse(settings.NOTE_FOLDERS)}
    if youtube.PREFIX in names or (settings.NOTES_DIR / youtube.PREFIX).exists():
        raise ConfigError(
            f"YOUTUBE_PLAYLISTS: videos are named {youtube.PREFIX}/..., and a NOTE_FOLDERS folder "
            f"or {settings.NOTES_DIR / youtube.PREFIX} already uses that name: rename it"
        )
    return youtube.configured(config, state, ledger=ledger, video_info=video_info, **api_options)


def web_limits(settings: Settings) -> Limits:
    """The WEB_* limits every page fetch keeps to (BOOKMARKS pages, save_url)."""
    types = tuple(t.strip().lower() for t in settings.WEB_CONTENT_TYPES.split(",") if t.strip())
    return Limits(
        timeout=settings.WEB_TIMEOUT,
        max_bytes=settings.WEB_MAX_BYTES,
        max_redirects=settings.WEB_MAX_REDIRECTS,
        content_types=types,
        robots=settings.WEB_ROBOTS,
        allow_private=settings.WEB_ALLOW_PRIVATE,
    )


def web_sources(settings: Settings, state: State, **options: Any) -> list[WebSource]:
    """The BOOKMARKS source (none when BOOKMARKS is empty; its files in order, without
    repeats); ConfigError when a NOTE_FOLDERS folder is named `web` (its notes' origin would
    be the pages'). `options`: WebSource's (tests: a clock, a fetcher)."""
    names = [n.strip() for n in settings.BOOKMARKS.split(",") if n.strip()]
    paths = list(dict.fromkeys(Path(n).expanduser() for n in names))
    if not paths:
        return []
    if WEB in (name for name, _ in parse(settings.NOTE_FOLDERS)):
        raise ConfigError(
            f"BOOKMARKS: pages are named {WEB}/..., and a NOTE_FOLDERS folder already uses "
            "that name: rename it"
        )
    wanted = tuple(k for k in (folder_key(f) for f in settings.BOOKMARKS_FOLDERS.split(",")) if k)
    return [
        WebSource(paths, state.web_dir(), web_limits(settings), wanted,
                  settings.WEB_REFRESH_DAYS, **options)
    ]  # fmt: skip


def file_sources(settings: Settings, options: IngestOptions) -> list[Source]:
    """The inbox and the folders, as `options` choose (`youtube_only`: none; `only`: those
    origins). ConfigError for a bad NOTE_FOLDERS (even with youtube_only: the settings are
    wrong), IngestError for a NOTES_DIR that is not a folder."""
    if not settings.NOTES_DIR.is_dir():
        raise IngestError(f"NOTES_DIR {settings.NOTES_DIR} is not a folder")
    found = folders(settings)
    files: list[Source] = [] if options.youtube_only else [inbox(settings, found), *found]
    if options.only is not None:
        files = [source for source in files if source.origin in options.only]
    return files


def sources(settings: Settings, state: State, options: IngestOptions = DEFAULTS) -> list[Source]:
    """Every source a run reads, in the order it syncs them: the inbox and the folders, the
    playlists (none with `options.only`: a watcher's batch spends no YouTube quota), the
    BOOKMARKS pages (not with `youtube_only`; with `only`, when it names "web")."""
    files = file_sources(settings, options)
    videos = playlists(settings, state) if options.only is None else []
    wanted = not options.youtube_only and (options.only is None or WEB in options.only)
    pages = web_sources(settings, state) if wanted else []
    return [*files, *videos, *pages]


def run(
    settings: Settings, client: EmbedClient, store: Store, options: IngestOptions = DEFAULTS
) -> Summary:
    """Ingest the inbox NOTES_DIR (and, with a rebuild, everything in ingested/), then sync
    every NOTE_FOLDERS folder, then every YOUTUBE_PLAYLISTS playlist (none with `options.only`:
    a watcher's batch spends no YouTube quota), then the BOOKMARKS pages (not with
    `youtube_only`; with `only`, when it names "web"), as `options` choose. Prose goes to `store`
    (COLLECTION) through `client`; code and notebooks to CODE_COLLECTION beside it, embedded
    with CODE_EMBED_MODEL. ConfigError for bad settings (a rebuild naming no collection of this
    index included), IngestError for a folder losing too many notes, before anything changes."""
    rebuild = options.rebuild
    if isinstance(rebuild, str) and rebuild not in (settings.COLLECTION, settings.CODE_COLLECTION):
        raise ConfigError(
            f"rebuild {rebuild!r}: not a collection of this index (COLLECTION "
            f"{settings.COLLECTION} or CODE_COLLECTION {settings.CODE_COLLECTION})"
        )
    state = State(settings.STATE_DIR)
    # its progress for whoever waits for the lock (another ingest.py, through a server too)
    options = replace(options, progress=RecordedProgress(state.progress_path, options.progress))
    everything = sources(settings, state, options)
    try:
        # the code client reaches the embedder as `client` does (its transport)
        with embed_client(settings, code=True, transport=client.transport) as code_client:
            code_live = store.beside(settings.CODE_COLLECTION)
            # a new model or chunker: written beside the searched collection (kb.ingest.switch)
            prose = ingest_run.Target(switch.begin(store, client), client)
            code = ingest_run.Target(switch.begin(code_live, code_client), code_client)
            config = ingest_config(settings)
            summary = ingest_run.run(everything, prose, code, state, config, options)
            if options.only is None and not options.youtube_only:  # every source: whole
                switch.finish(store, prose.store)
                switch.finish(code_live, code.store)
            return summary
    finally:
        youtube.close([s for s in everything if isinstance(s, youtube.PlaylistSource)])
