"""The `answer_question` tool: retrieve, then a cited answer written by the client's own model
(MCP sampling) when it offers one, else by LLM_URL, else a clear error (kb.search.answer).

Sampling over stateless HTTP: with protocol 2026-07-28 the SDK asks for the sample inside an
`InputRequiredResult` and the client retries the call with the model's reply, so no
server-to-client request and no session are needed (the server keeps its stateless JSON
transport). An older client is only sampled where its request's channel can carry a
server-to-client request (stdio); otherwise LLM_URL writes the answer. A sibling module of
server.py (this folder is not a package). No `from __future__ import annotations`: the SDK
evaluates the tool's annotations, and `Resolve(...)` names closures defined below.
"""

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer, Resolve, Sample
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CreateMessageResult, SamplingMessage, TextContent, ToolAnnotations
from mcp_types.version import is_version_at_least
from pydantic import BaseModel, Field, StringConstraints

from kb.app.backend import Backend, rerank_config
from kb.search import answer as kb_answer
from kb.search import query as kb_search
from kb.search import rerank as kb_rerank
from notes_server.surface import (
    TOOL_MAX_K,
    AllTags,
    Count,
    DateFrom,
    DateTo,
    IngestedFrom,
    IngestedTo,
    PathFilter,
    Tags,
)

log = logging.getLogger("mcp-server")

SAMPLING_IN_RESULT = "2026-07-28"  # first protocol whose tools/call carries the sample request

ANSWER_QUESTION = """Answer a question from the user's notes with citations: retrieves the \
best passages, then writes a short answer that cites `[source:lines]` after each claim. Every \
citation names a passage it retrieved (listed in `citations`); a citation the writer invented \
is removed and listed in `dropped_citations`.

The answer is written by your own model through MCP sampling when this client supports it, \
else by the model the user configured (LLM_URL). Prefer `search_notes` when you want to read \
the passages and write the answer yourself; use this when the user asks for a quick cited \
answer, or when the server's configured model should write it."""

Question = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1),
    Field(description="The question, in the user's words."),
]


class Citation(BaseModel):
    label: str = Field(description="As cited in the answer: `source:line_start-line_end`.")
    source: str | None = Field(description="Note file, relative to the notes folder.")
    line_start: int | None = Field(description="First line of the passage (1-based).")
    line_end: int | None = Field(description="Last line of the passage.")


class Answer(BaseModel):
    answer: str = Field(description="The answer with `[source:lines]` citations.")
    citations: list[Citation] = Field(description="The retrieved passages the answer cites.")
    dropped_citations: list[str] = Field(
        description="Citations the writer made that named no retrieved passage (removed)."
    )
    written_by: str = Field(description="'client' (MCP sampling), 'llm_url', or 'none'.")
    note: str | None = Field(None, description="Why results were not reranked, if expected.")


@dataclass(frozen=True)
class Retrieved:
    hits: list[kb_search.Hit]
    note: str | None


def add_answer_tool(
    server: MCPServer, backend: Backend, errors: Callable[[], AbstractContextManager[None]]
) -> None:
    """Register answer_question; `errors` maps kb's failures to tool errors (server.py's)."""

    def retrieve(
        question: str,
        k: int = 5,
        tags: list[str] | None = None,
        all_tags: list[str] | None = None,
        date_from: str | None = None,
        date_to: str | None = None,
        ingested_from: str | None = None,
        ingested_to: str | None = None,
        path: str | None = None,
    ) -> Retrieved:
        try:
            where = kb_search.Filters(
                tags_any=tags or (),
                tags_all=all_tags or (),
                date_from=date_from,
                date_to=date_to,
                ingested_from=ingested_from,
                ingested_to=ingested_to,
                path_prefix=path,
            )
        except ValueError as exc:
            raise ToolError(f"validation error for answer_question: {exc}") from None
        k = max(1, min(TOOL_MAX_K, k))
        with errors():
            found = kb_rerank.search(
                backend.store(), backend.client, rerank_config(backend.settings), question, k,
                filters=where,
                code=(backend.code_store(), backend.code_client),
            )  # fmt: skip
        return Retrieved(found.hits, found.note)

    def draft(
        ctx: Context, question: str, found: Annotated[Retrieved, Resolve(retrieve)]
    ) -> Sample | None:
        """Ask the client's model, when it can be asked from here; None: it cannot."""
        capabilities = ctx.client_capabilities
        if not found.hits or capabilities is None or capabilities.sampling is None:
            return None
        version = ctx.protocol_version or ""
        if not is_version_at_least(version, SAMPLING_IN_RESULT) and not (
            ctx.session.can_send_request
        ):
            return None  # an older client over stateless HTTP: no channel to ask it on
        prompt = kb_answer.user_prompt(question, found.hits)
        return Sample(
            [SamplingMessage(role="user", content=TextContent(text=prompt))],
            max_tokens=kb_answer.MAX_ANSWER_TOKENS,
            system_prompt=kb_answer.SYSTEM_PROMPT,
            temperature=0.1,
        )

    @server.tool(
        description=ANSWER_QUESTION,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def answer_question(
        question: Question,
        found: Annotated[Retrieved, Resolve(retrieve)],
        sampled: Annotated[CreateMessageResult | None, Resolve(draft)],
        k: Count = 5,
        tags: Tags = None,
        all_tags: AllTags = None,
        date_from: DateFrom = None,
        date_to: DateTo = None,
        ingested_from: IngestedFrom = None,
        ingested_to: IngestedTo = None,
        path: PathFilter = None,
    ) -> Answer:
        settings = backend.settings
        if not found.hits:
            raw, by = "Nothing in the notes matches this question.", "none"
        elif sampled is not None:
            content: Any = sampled.content
            raw, by = (content.text if isinstance(content, TextContent) else ""), "client"
        elif settings.LLM_URL:
            try:
                raw = await anyio.to_thread.run_sync(
                    lambda: kb_answer.chat(
                        settings.LLM_URL,
                        question,
                        found.hits,
                        model=settings.LLM_MODEL,
                        api_key=settings.LLM_API_KEY,
                        timeout=settings.LLM_TIMEOUT,
                    )
                )
            except kb_answer.AnswerError as exc:
                raise ToolError(str(exc)) from None
            by = "llm_url"
        else:
            raise ToolError(kb_answer.NO_MODEL)
        cited = kb_answer.cite(raw, found.hits)
        log.info(
            "answer_question k=%d hits=%d by=%s cited=%d dropped=%d",
            k,
            len(found.hits),
            by,
            len(cited.cited),
            len(cited.dropped),
        )
        return Answer(
            answer=cited.text,
            citations=[
                Citation(
                    label=kb_answer.label(h),
                    source=h.source,
                    line_start=h.line_start,
                    line_end=h.line_end,
                )
                for h in cited.cited
            ],
            dropped_citations=cited.dropped,
            written_by=by,
            note=found.note,
        )
