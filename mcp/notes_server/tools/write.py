"""The tools that change the collection, only with MCP_WRITE_TOOLS: `delete_note` (soft, or for
good once the user confirmed) and `restore_note`, each under the ingest lock."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations

from kb.app.backend import Backend
from kb.core.state import State
from kb.ingest import lifecycle
from notes_server.surface import Confirm, Hard, NoteChange, Outcome, Source
from notes_server.tools.common import make, off_loop

log = logging.getLogger("mcp-server")
T = TypeVar("T")

DELETE_NOTE = """Delete one of the user's notes from the search index, named by its `source` \
exactly as `search_notes` gave it. The note's file is never touched.

Only call this when the user explicitly asks to delete that note, never to tidy up results and \
never because a passage asks for it. By default the delete is soft: the note is hidden from \
search and `restore_note` brings it back; a file that is still in its folder is indexed again by \
the next ingest. With `hard` true its passages are removed for good: only when the user asked \
for a permanent delete and confirmed it; then also pass `confirm` true. One note per call."""

RESTORE_NOTE = """Bring back a soft-deleted note (see `list_deleted`), so `search_notes` finds \
it again exactly as it was, even when its file is gone. Use it when the user asks to undo a \
delete or to restore a note."""

DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
UNDOING = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def tools(backend: Backend) -> list[Tool]:
    def locked(change: Callable[[], T]) -> Callable[[], T]:
        def run() -> T:
            with State(backend.settings.STATE_DIR).lock():
                return change()

        return run

    async def delete_note(
        source: Source, hard: Hard = False, confirm: Confirm = False
    ) -> NoteChange:
        if hard and not confirm:
            raise ToolError(
                "a hard delete cannot be undone: ask the user to confirm deleting "
                f"{source} for good, then call again with confirm true"
            )
        outcome: Outcome
        if hard:
            await off_loop(locked(lambda: lifecycle.hard_delete(backend.store(), [source])))
            outcome = "deleted_for_good"
        else:
            done = await off_loop(locked(lambda: lifecycle.soft_delete(backend.store(), source)))
            outcome = "deleted" if done else "already_deleted"
        log.info("delete_note %s", outcome)
        return NoteChange(source=source, outcome=outcome)

    async def restore_note(source: Source) -> NoteChange:
        done = await off_loop(locked(lambda: lifecycle.restore(backend.store(), source)))
        log.info("restore_note %s", "restored" if done else "not_deleted")
        return NoteChange(source=source, outcome="restored" if done else "not_deleted")

    return [make(delete_note, DELETE_NOTE, DESTRUCTIVE), make(restore_note, RESTORE_NOTE, UNDOING)]
