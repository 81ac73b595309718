"""The `answer_question` tool: retrieve (kb.search.search, every filter search_notes takes),
then a cited answer written by the client's own model (MCP sampling) when it offers one, else by
LLM_URL, else a clear error (kb.search.answer).

Sampling over stateless HTTP: with protocol 2026-07-28 the SDK asks for the sample inside an
`InputRequiredResult` and the client retries the call with the model's reply, so no
server-to-client request and no session are needed (the server keeps its stateless JSON
transport). An older client is only sampled where its request's channel can carry a
server-to-client request (stdio); otherwise LLM_URL writes the answer. No
`from __future__ import annotations`: the SDK evaluates the tool's annotations, and
`Resolve(...)` names closures defined below.
"""

import logging
from dataclasses import dataclass
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, Resolve, Sample
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CreateMessageResult, SamplingMessage, TextContent, ToolAnnotations
from mcp_types.version import is_version_at_least
from pydantic import BaseModel, Field

from kb.app.backend import Backend
from kb.core.schema import Hit
from kb.search import TOOL_MAX_K, SearchRequest, search
from kb.search import answer as kb_answer
from kb.search.filters import Filters
from notes_server.surface import Count, Question
from notes_server.tools.common import invalid, make, tool_errors, with_filters

log = logging.getLogger("mcp-server")

SAMPLING_IN_RESULT = "2026-07-28"  # first protocol whose tools/call carries the sample request

ANSWER_QUESTION = """Answer a question from the user's notes: retrieves the best \
passages (search_notes' filters), then writes a short answer citing `[source:lines]` per claim; \
a citation of anything not retrieved is removed (`dropped_citations`).

Written by your model through MCP sampling when the client supports it, else by LLM_URL's. \
Prefer `search_notes` and answering yourself; use this for a quick cited answer."""


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
    hits: list[Hit]
    note: str | None


def tools(backend: Backend) -> list[Tool]:
    @with_filters("answer_question")
    def retrieve(question: str, k: int = 5, *, where: Filters) -> Retrieved:
        try:
            request = SearchRequest(question, max(1, min(TOOL_MAX_K, k)), filters=where)
        except ValueError as exc:
            raise invalid("answer_question", exc) from None
        with tool_errors():
            found = search(backend.searcher(), request)
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

    @with_filters("answer_question")
    async def answer_question(
        question: Question,
        found: Annotated[Retrieved, Resolve(retrieve)],
        sampled: Annotated[CreateMessageResult | None, Resolve(draft)],
        k: Count = 5,
        *,
        where: Filters,
    ) -> Answer:
        if not found.hits:
            raw, by = "Nothing in the notes matches this question.", "none"
        elif sampled is not None:
            content = sampled.content
            raw, by = (content.text if isinstance(content, TextContent) else ""), "client"
        else:
            raw, by = await written_by_llm_url(backend, question, found.hits), "llm_url"
        cited = kb_answer.cite(raw, found.hits)
        log.info(
            "answer_question k=%d filters=%d hits=%d by=%s cited=%d dropped=%d",
            k, where.count(), len(found.hits), by, len(cited.cited), len(cited.dropped),
        )  # fmt: skip
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

    annotations = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    return [make(answer_question, ANSWER_QUESTION, annotations)]


async def written_by_llm_url(backend: Backend, question: str, hits: list[Hit]) -> str:
    """The answer LLM_URL writes; a tool error when none is configured or it fails."""
    settings = backend.settings
    if not settings.LLM_URL:
        raise ToolError(kb_answer.NO_MODEL)
    try:
        return await anyio.to_thread.run_sync(
            lambda: kb_answer.chat(
                settings.LLM_URL,
                question,
                hits,
                model=settings.LLM_MODEL,
                api_key=settings.LLM_API_KEY,
                timeout=settings.LLM_TIMEOUT,
            )
        )
    except kb_answer.AnswerError as exc:
        raise ToolError(str(exc)) from None
