"""Search through a running MCP server: its `search_notes` tool, over streamable HTTP.

Embedded Qdrant (QDRANT_PATH) opens in one process at a time. While the MCP server holds the
folder, query.py asks the server instead (`search_notes`; `why_not_found` for --why), with the
real MCP SDK client: the same kb.search.SearchRequest as the tool's arguments, the same hits
back as kb.core.schema.Hit.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, fields

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from kb.core.schema import Explanation, Hit
from kb.search import PARAMETERS, SearchRequest
from kb.search.rerank import Reranked

TIMEOUT_S = 120.0  # a search may wait for the embedder's current batch
_HIT_FIELDS = [f.name for f in fields(Hit) if f.init]  # uri is made from the others
# an Explanation's fields a result leaves out when null (those without a default)
_UNSET_EXPLANATION = {f.name: None for f in fields(Explanation) if f.default is MISSING}


class RemoteError(Exception):
    """The MCP server could not answer; `reachable` says whether it answered at all."""

    def __init__(self, message: str, *, reachable: bool) -> None:
        super().__init__(message)
        self.reachable = reachable


def first_failure(exc: BaseException) -> BaseException:
    """The first real error inside the task-group wrappers the SDK client raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def arguments(request: SearchRequest) -> dict[str, object]:
    """`request` as search_notes' arguments (kb.search.PARAMETERS: the same names; one left at
    its default is not sent, the tool's default being the same; the tool clamps k to
    TOOL_MAX_K)."""
    sent: dict[str, object] = {"query": request.query, **request.filters.arguments()}
    for spec in PARAMETERS:
        value = getattr(request, spec.name)
        if value != spec.default:
            sent[spec.name] = spec.argument(value)
    return sent


def hit_of(item: dict[str, object]) -> Hit:
    """A result of search_notes as the Hit it was made from (a field left out is its default;
    `source`, the one without a default that may be null, None)."""
    values = {"source": None} | {name: item[name] for name in _HIT_FIELDS if name in item}
    if isinstance(values.get("explain"), dict):
        given = _UNSET_EXPLANATION | values["explain"]  # type: ignore[operator]
        values["explain"] = Explanation(**given)
    return Hit(**values)  # type: ignore[arg-type]


def call(url: str, token: str, tool: str, sent: dict[str, object]) -> dict[str, object]:
    """Call `tool` with `sent` at the MCP endpoint `url`, sending `Authorization: Bearer
    <token>` when a token is set: its answer (`answer_of`). RemoteError says why not."""

    async def ask() -> CallToolResult:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        async with (
            httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            return await client.call_tool(tool, sent)

    try:
        result = anyio.run(ask)
    except (MCPError, httpx2.HTTPError, ExceptionGroup) as exc:
        failure = first_failure(exc)
        if isinstance(failure, httpx2.TransportError):
            raise RemoteError(f"no answer ({failure})", reachable=False) from None
        if isinstance(failure, MCPError):
            raise RemoteError(f"refused: {failure.error.message}", reachable=True) from None
        if isinstance(failure, httpx2.HTTPError):
            raise RemoteError(f"HTTP error: {failure}", reachable=True) from None
        raise
    if result.is_error:
        text = " ".join(getattr(part, "text", "") for part in result.content)
        raise RemoteError(text, reachable=True)
    answer = answer_of(result)
    if answer is None:
        raise RemoteError(f"{tool} returned no JSON result", reachable=True)
    return answer


def answer_of(result: CallToolResult) -> dict[str, object] | None:
    """A tool's answer: the JSON object of its text (the server sends each result once, as
    compact JSON text: docs/design/tool-surface.md), or the structured content of an older
    server; None if it has neither."""
    if isinstance(result.structured_content, dict):
        return result.structured_content
    text = "".join(getattr(part, "text", "") for part in result.content)
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def search_notes(url: str, token: str, request: SearchRequest) -> Reranked:
    """Run `request` as a `search_notes` call at the MCP endpoint `url`."""
    content = call(url, token, "search_notes", arguments(request))
    found = content.get("results")
    if not isinstance(found, list):
        raise RemoteError("search_notes returned no results list", reachable=True)
    hits = [hit_of(item) for item in found]
    note, no_match = content.get("note"), content.get("no_good_match")
    return Reranked(hits, reranked=any(h.rerank_score is not None for h in hits),
                    note=note if isinstance(note, str) else None,
                    no_good_match=no_match if isinstance(no_match, bool) else None)  # fmt: skip
