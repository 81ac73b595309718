"""The MCP tools, grouped: search.py (search_notes, browse_notes, list_tags), notes.py
(read_note, status, list_deleted), answer.py (answer_question) and, with MCP_WRITE_TOOLS,
write.py (delete_note, restore_note) and remember.py (save_note, save_url, sync). Each
module's `tools(backend)` builds its tools; a new tool
goes into the module of its group (its description, the prompt the model reads, beside it)."""

from __future__ import annotations

from mcp.server.mcpserver.tools import Tool

from kb.app.backend import Backend
from notes_server.tools import answer, notes, remember, search, write


def all_tools(backend: Backend) -> list[Tool]:
    found = [*search.tools(backend), *notes.tools(backend), *answer.tools(backend)]
    if not backend.settings.MCP_WRITE_TOOLS:
        return found
    return [*found, *write.tools(backend), *remember.tools(backend)]
