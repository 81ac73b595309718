"""What the assistant's context pays for a search, as the client receives it (every content
block plus the structured content), on a real corpus: bench/notes_corpus (39 hand-written notes,
41 queries) ingested by the real ingest code, the server in-process under uvicorn, the MCP SDK's
client. tools/list's budget is held in test_mcp_server.py; docs/design/tool-surface.md says why
results are compact JSON text, sent once."""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import REPO_ROOT, free_port
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_fixtures import make_settings, serve_in_process
from mcp_types import CallToolResult

from kb.app import ingest
from kb.app.backend import embed_client, open_store

CORPUS = REPO_ROOT / "bench" / "notes_corpus"
DEFAULT_K_BUDGET = 8_000  # characters at the default k (5): about 2,000 tokens
K20_BUDGET = 40_000  # at k=20, the most a call may ask: under Claude Code's 10,000-token warning
# (`language` is every passage's: a note's detected or frontmatter language)
VIDEO_AND_WEB_FIELDS = {"channel", "url", "duration_s", "view_count", "uploaded", "categories",
                        "thumbnail", "site", "author", "fetched_at",
                        "bookmark_folders"}  # fmt: skip


@pytest.fixture(scope="module")
def corpus_url(tmp_path_factory: pytest.TempPathFactory, embedder_transport) -> Iterator[str]:
    root = tmp_path_factory.mktemp("notes-corpus")
    shutil.copytree(CORPUS / "notes", root / "data")
    settings = make_settings(
        IN_PROCESS_EMBED_URL, root / "qdrant", NOTES_DIR=root / "data", STATE_DIR=root / "state",
        MCP_PORT=free_port(),
    )  # fmt: skip
    with (
        embed_client(settings, transport=embedder_transport) as client,
        open_store(settings) as store,
    ):
        summary = ingest.run(settings, client, store)
    assert not summary.failed, summary.failed
    with serve_in_process(settings, transport=embedder_transport) as server:
        yield server.url


def queries() -> list[str]:
    lines = (CORPUS / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


def searches(url: str, k: int | None, asked: list[str] | None = None) -> list[CallToolResult]:
    """search_notes for every corpus query or those `asked` (k None: the tool's default), one
    SDK session."""

    async def run() -> list[CallToolResult]:
        http = httpx2.AsyncClient(timeout=120.0)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            more = {} if k is None else {"k": k}
            asking = queries() if asked is None else asked
            return [await client.call_tool("search_notes", {"query": q, **more}) for q in asking]

    return anyio.run(run)


def received(result: CallToolResult) -> int:
    """Characters the client receives: every text block plus the structured content (compact)."""
    assert not result.is_error, result.content
    texts = sum(len(getattr(part, "text", "")) for part in result.content)
    structured = result.structured_content
    return texts + (0 if structured is None else len(json.dumps(structured, separators=(",", ":"))))


def test_search_notes_at_the_default_k_fits_in_8k_characters(corpus_url: str) -> None:
    sizes = [received(result) for result in searches(corpus_url, None)]
    print(f"default k: median {statistics.median(sizes):.0f}, max {max(sizes)} characters")
    assert max(sizes) <= DEFAULT_K_BUDGET


def test_search_notes_at_k_20_fits_in_40k_characters(corpus_url: str) -> None:
    sizes = [received(result) for result in searches(corpus_url, 20)]
    print(f"k=20: median {statistics.median(sizes):.0f}, max {max(sizes)} characters")
    assert max(sizes) <= K20_BUDGET


def empties(value: Any, where: str = "") -> list[str]:
    """Where `value` holds a null, an empty string, list or object (below its top level)."""
    if isinstance(value, dict):
        found = [f"{where}.{k}" for k, v in value.items() if v in (None, "", [], {})]
        return found + [e for k, v in value.items() for e in empties(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [e for i, v in enumerate(value) for e in empties(v, f"{where}[{i}]")]
    return []


def test_a_result_is_sent_once_as_json_text_without_null_or_empty_fields(corpus_url: str) -> None:
    for result in searches(corpus_url, 20, queries()[:10]):
        assert result.structured_content is None
        [block] = result.content
        answer = json.loads(getattr(block, "text", ""))
        assert [e for hit in answer["results"] for e in empties(hit)] == []
        assert answer.get("note") is not None or "note" not in answer
        for hit in answer["results"]:
            assert hit.keys() >= {"text", "source", "score", "line_start", "title"}
            assert "kind" not in hit and not hit.keys() & VIDEO_AND_WEB_FIELDS  # notes only
            assert "hidden_chars_removed" not in hit  # none removed: nothing to say
