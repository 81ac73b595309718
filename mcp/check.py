"""Check a running MCP server end to end, as Claude Code would use it.

`uv run mcp/check.py` connects to MCP_URL (default: the server's own MCP_HOST:MCP_PORT, e.g.
http://127.0.0.1:8000/mcp) over streamable HTTP with the SDK client (sending `Authorization:
Bearer $MCP_TOKEN` when MCP_TOKEN is set), lists the tools, calls list_tags, searches for a
word taken from a tag or from a stored passage (so it assumes nothing about the notes), checks
every result field and a tag filter, and prints `mcp ok`. Any failure prints one `error: ...`
line and exits 1.
"""

from __future__ import annotations

import re
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from kb.app.cli import fail, script
from kb.app.remote import answer_of
from kb.core.settings import get_settings

TOOLS = {"search_notes", "list_tags"}
# Field -> accepted types of one search_notes result; only the first three are always there (a
# field with nothing to say is left out).
FIELDS: dict[str, tuple[type, ...]] = {
    "text": (str,),
    "source": (str,),
    "score": (int, float),
    "title": (str,),
    "heading_path": (list,),
    "tags": (list,),
    "topic": (str,),
    "document_date": (str,),
    "date_ingested": (str,),
}
REQUIRED = ("text", "source", "score")
K = 3
TIMEOUT_S = 60.0  # a first search may wait for the embedder's first batch


class CheckFailed(Exception):
    pass


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = " ".join(getattr(part, "text", "") for part in result.content)
        raise CheckFailed(f"{tool} failed: {text}")
    answer = answer_of(result)
    if answer is None:
        raise CheckFailed(f"{tool} returned no JSON object")
    return answer


def check_results(results: Any, k: int, what: str) -> list[dict[str, Any]]:
    if not isinstance(results, list) or not results:
        raise CheckFailed(f"{what} returned no results (is the collection empty? run ingest.py)")
    if len(results) > k:
        raise CheckFailed(f"{what} returned {len(results)} results for k={k}")
    for i, hit in enumerate(results):
        for field, types in FIELDS.items():
            if field in REQUIRED and field not in hit:
                raise CheckFailed(f"{what} result {i}: field {field!r} missing")
            if field in hit and not isinstance(hit[field], types):
                raise CheckFailed(f"{what} result {i}: field {field!r} of wrong type")
        if not hit["text"] or not hit["source"]:
            raise CheckFailed(f"{what} result {i}: empty text or source")
    scores = [hit["score"] for hit in results]
    if scores != sorted(scores, reverse=True):
        raise CheckFailed(f"{what} results are not ordered by score")
    return results


def a_word(text: str) -> str:
    """The longest word of a text: a query with something to find whatever the notes are."""
    words = re.findall(r"\w{3,}", text) or [text.strip()]
    return max(words, key=len)


def respelled(tag: str) -> str:
    """The same tag as a user might type it: padded, and upper case where that round-trips."""
    return f"  {tag.upper() if tag.upper().lower() == tag else tag}  "


async def check(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        names = {tool.name for tool in (await client.list_tools()).tools}
        if missing := TOOLS - names:
            raise CheckFailed(f"server lacks tools {sorted(missing)} (has {sorted(names)})")

        tags = (await call(client, "list_tags", {})).get("tags")
        if not isinstance(tags, list) or not all(
            isinstance(t, dict)
            and isinstance(t.get("tag"), str)
            and isinstance(t.get("chunks"), int)
            and isinstance(t.get("notes"), int)
            for t in tags
        ):
            raise CheckFailed("list_tags: expected a 'tags' list of {tag, chunks, notes} objects")

        # Seed the query from the first tag, else from whatever passage an arbitrary query finds.
        if tags:
            query = a_word(tags[0]["tag"])
        else:
            probe = await call(client, "search_notes", {"query": "notes", "k": 1})
            query = a_word(check_results(probe.get("results"), 1, "search_notes")[0]["text"])
        found = await call(client, "search_notes", {"query": query, "k": K})
        check_results(found.get("results"), K, "search_notes")

        if tags:
            tag = tags[0]["tag"]
            arguments = {"query": query, "k": K, "tags": [respelled(tag)]}
            filtered = await call(client, "search_notes", arguments)
            for hit in check_results(filtered.get("results"), K, "search_notes with tags"):
                if tag not in hit["tags"]:
                    raise CheckFailed(f"tag filter {tag!r} returned a passage without that tag")


def describe(exc: BaseException) -> str | None:
    if isinstance(exc, CheckFailed):
        return str(exc)
    if isinstance(exc, MCPError):
        return f"server refused: {exc.error.message}"
    if isinstance(exc, httpx2.TransportError):
        return (
            f"cannot reach the server ({exc}); is it running (`make up` or `uv run mcp/server.py`)?"
        )
    if isinstance(exc, httpx2.HTTPError):
        return f"HTTP error: {exc}"
    return None


def first_failure(exc: BaseException) -> BaseException:
    """The first real error inside the task-group wrappers the SDK client raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


@script
def main() -> int:
    settings = get_settings()
    url = settings.mcp_url
    try:
        anyio.run(check, url, settings.MCP_TOKEN)
    except (CheckFailed, MCPError, httpx2.HTTPError, ExceptionGroup) as exc:
        message = describe(first_failure(exc))
        if message is None:
            raise  # not a failure this check knows how to explain: a bug, keep the traceback
        return fail(f"{url}: {message}")
    print("mcp ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
