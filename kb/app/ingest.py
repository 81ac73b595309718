"""The ingest as the settings say: what `ingest.py`, the dashboard's Sync, the watcher and the
MCP server's hand-off route run. The sources (every kind's, kb.sources.registry), the code
collection's client and the run's config are built here from the settings; kb.ingest.run runs
them knowing no setting and no kind of source.
"""

from __future__ import annotations

from dataclasses import replace

from kb.app.backend import embed_client
from kb.content.notes import normalise_tags
from kb.core.errors import ConfigError
from kb.core.settings import Settings
from kb.core.state import State
from kb.embedding.client import EmbedClient
from kb.ingest import run as ingest_run
from kb.ingest import switch
from kb.ingest.options import DEFAULTS, IngestConfig, IngestOptions
from kb.ingest.progress import RecordedProgress, Summary
from kb.sources import registry
from kb.sources.base import Source
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


def sources(settings: Settings, state: State, options: IngestOptions = DEFAULTS) -> list[Source]:
    """Every source a run reads, in the order it syncs them (kb.sources.registry: the inbox,
    the folders, the playlists, the BOOKMARKS pages): with `options.only`, those origins and no
    remote kind (a watcher's batch spends no YouTube quota); with `youtube_only`, the remote
    kinds' alone (the others' settings still checked). ConfigError for bad settings,
    IngestError for a NOTES_DIR that is not a folder."""
    return registry.build(settings, state, only=options.only, remote_only=options.youtube_only)


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
        registry.close(everything)
