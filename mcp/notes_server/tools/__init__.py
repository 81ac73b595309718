"""The MCP tools, grouped: search.py (search_notes, browse_notes, list_tags), notes.py
(read_note, status, list_deleted), answer.py (answer_question) and, with MCP_WRITE_TOOLS,
write.py (delete_note, restore_note). Each module's `tools(backend)` builds its tools; a new tool
goes into the module of its group (its description, the prompt the model reads, beside it)."""

from __future__ import annotations

from mcp.server.mcpserver.tools import Tool

from kb.app.backend import Backend
from notes_server.tools import answer, notes, search, write


def all_tools(backend: Backend) -> list[Tool]:
    found = [*search.tools(backend), *notes.tools(backend), *answer.tools(backend)]
    return found + (write.tools(backend) if backend.settings.MCP_WRITE_TOOLS else [])
