"""The tools that add to the collection, only with MCP_WRITE_TOOLS: `save_note` (a new note in
the inbox), `save_url` (a web page saved as one) and `sync` (the dashboard's sync), each under
the ingest lock (kb.app.remember): refused, with nothing written, while another sync runs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations
from pydantic import Field, StringConstraints

from kb.app import remember
from kb.app.backend import Backend
from kb.core.errors import ConfigError, IngestBusy, SaveError
from kb.ingest.progress import format_summary
from notes_server.dashboard_sync import printable_fields
from notes_server.surface import SavedNote, SourceFailure, SyncSummary
from notes_server.tools.common import make, off_loop

log = logging.getLogger("mcp-server")

SAVE_NOTE = """Save a new note in the user's notes when they ask you to remember, note or \
write something down: a Markdown file in their inbox (never over another file), indexed before \
this returns, so search_notes finds it at once. Write the text as the user would want to read \
it later; tell them the `file` it went to."""

SAVE_URL = """Save a web page the user asks to keep ("save this article"): it is fetched, its \
main text kept as a note in their inbox and indexed at once. Returns its title and passages; \
an error says why a page could not be saved (unreachable, too large, not a page)."""

SYNC = """Sync the user's sources now, as the dashboard's Sync does: new and changed notes, \
folders, YouTube playlists and bookmarks, or only `source`. Only when the user asks to sync or \
refresh; it can take minutes. One sync at a time: a sync already running is an error."""

ADDING = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
FETCHING = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
SYNCING = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Tags = Annotated[list[str] | None, Field(description="Tags for the note.")]
BUSY = "{}: nothing was saved; try again when that sync has finished"
SYNC_BUSY = "{}: this sync did not start; its results are in the next status"
T = TypeVar("T")


def tools(backend: Backend) -> list[Tool]:
    settings = backend.settings

    def answer(saved: remember.Saved) -> SavedNote:
        return SavedNote(file=saved.file, source=saved.source, title=saved.title,
                         passages=saved.passages)  # fmt: skip

    async def save_note(
        title: Annotated[Text, Field(description="A short title: the note's name and heading.")],
        text: Annotated[Text, Field(description="The note's text (Markdown).")],
        tags: Tags = None,
        folder: Annotated[
            str | None, Field(description="A folder of the inbox, e.g. 'read later'.")
        ] = None,
    ) -> SavedNote:
        def work() -> remember.Saved:
            store = backend.store()
            return remember.save_note(settings, backend.client, store, title, text, tags or (),
                                      folder)  # fmt: skip

        saved = await off_loop(lambda: guarded(work))
        log.info("save_note: %s (%d passages)", saved.file, saved.passages)
        return answer(saved)

    async def save_url(
        url: Annotated[Text, Field(description="The page's address (http or https).")],
        tags: Tags = None,
        note: Annotated[
            str | None, Field(description="Why the user keeps it, kept with it.")
        ] = None,
    ) -> SavedNote:
        saved = await off_loop(lambda: guarded(lambda: remember.save_url(
            settings, backend.client, backend.store(), url, tags or (), note)))  # fmt: skip
        log.info("save_url: %s (%d passages)", saved.file, saved.passages)
        return answer(saved)

    async def sync(
        source: Annotated[
            str | None,
            Field(
                description="'inbox', a folder's name, or another source's (youtube, web, "
                "mail, notion, evernote); default: all."
            ),
        ] = None,
    ) -> SyncSummary:
        done = await off_loop(lambda: guarded(lambda: remember.sync(
            settings, backend.client, backend.store(), source or None), SYNC_BUSY))  # fmt: skip
        shown = printable_fields(done)  # one line per name, whatever the names hold
        log.info("sync %s: %d failed", source or "all", len(done.failed))
        return SyncSummary(
            summary=format_summary(shown), added=len(done.added), replaced=len(done.replaced),
            unchanged=len(done.unchanged), restored=len(done.restored),
            deleted=len(done.deleted),
            failed=[SourceFailure(source=f.source, reason=f.reason) for f in shown.failed],
        )  # fmt: skip

    return [make(save_note, SAVE_NOTE, ADDING), make(save_url, SAVE_URL, FETCHING),
            make(sync, SYNC, SYNCING)]  # fmt: skip


def guarded(work: Callable[[], T], busy: str = BUSY) -> T:
    """`work`, its failures as the messages the model reads."""
    try:
        return work()
    except IngestBusy as exc:
        raise ToolError(busy.format(exc)) from exc
    except (SaveError, ConfigError) as exc:
        raise ToolError(str(exc)) from exc
