"""answer_question: retrieval, then a cited answer written through MCP sampling (the real SDK
client's sampling callback over the real HTTP transport), through an OpenAI-compatible chat
server on 127.0.0.1 (LLM_URL), or a clear error; citations only ever name retrieved passages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from fastapi import FastAPI, Request
from helpers import free_port, serve_in_thread
from ingest_fixtures import run_script, script_env
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_fixtures import (
    call_tool,
    error_text,
    list_tools,
    make_settings,
    serve_in_process,
    tool_answer,
)
from mcp_types import CallToolResult, CreateMessageRequestParams, CreateMessageResult, TextContent

from kb.app.backend import embed_client, open_store, searcher
from kb.core.schema import Hit
from kb.search import SearchRequest, search
from kb.search import answer as kb_answer
from kb.search.filters import FILTERS

QUESTION = "how long does kimchi ferment"
# Bad filters, each refused by search_notes and answer_question alike (naming the argument)
BAD_FILTERS: list[dict[str, Any]] = [
    {"date_from": "March 2024"},
    {"ingested_to": "2024/03/01"},
    {"date_from": "2024-06-01", "date_to": "2024-01-01"},
    {"uploaded_from": "yesterday"},
    {"min_duration": "soon"},
    {"min_duration": 700, "max_duration": "10m"},
    {"tags": [["nested"]]},
    {"kind": "podcast"},
]
# What a careless model might write: good numbers, a number past the passages, a made-up file.
REPLY = (
    "Kimchi ferments for two days at room temperature [1], then goes in the fridge [1][2]. "
    "Some say a week [7]; see also [secret/plans.md:1-3]."
)


def local_dirs(tmp_path: Path) -> dict[str, Path]:
    return {"NOTES_DIR": tmp_path / "data", "STATE_DIR": tmp_path / "state"}


def retrieved(settings, k: int = 5, transport: httpx.BaseTransport | None = None) -> list[Hit]:
    with (
        open_store(settings) as store,
        embed_client(settings, transport=transport) as client,
        embed_client(settings, code=True, transport=transport) as code_client,
    ):
        return search(
            searcher(settings, store, client, code_client), SearchRequest(QUESTION, k)
        ).hits


def labels_in(text: str) -> set[str]:
    return set(re.findall(r"\[([^\[\]]+:[^\[\]]+)\]", text))


def sampled_call(url: str, arguments: dict[str, Any], prompts: list[str]) -> CallToolResult:
    async def sample(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        prompts.append(params.system_prompt or "")
        prompts.append(params.messages[0].content.text)
        return CreateMessageResult(
            role="assistant", content=TextContent(text=REPLY), model="client-model"
        )

    async def run() -> CallToolResult:
        http = httpx2.AsyncClient(timeout=60.0)
        client = Client(streamable_http_client(url, http_client=http), sampling_callback=sample)
        async with http, client:
            return await client.call_tool("answer_question", arguments)

    return anyio.run(run)


def test_the_clients_model_writes_the_answer_through_sampling_and_cites_only_retrieved(
    embedder_transport, store_copy
) -> None:
    settings = make_settings(IN_PROCESS_EMBED_URL, store_copy(), MCP_PORT=free_port())
    hits = retrieved(settings, 4, embedder_transport)
    prompts: list[str] = []
    # the stateless JSON transport the server runs
    with serve_in_process(settings, transport=embedder_transport) as server:
        result = sampled_call(server.url, {"question": QUESTION, "k": 4}, prompts)
    assert not result.is_error, result
    body = tool_answer(result)
    assert body["written_by"] == "client"
    assert "[1]" in prompts[0] and QUESTION in prompts[1]
    assert f"[1] {kb_answer.label(hits[0])}" in prompts[1]  # passages numbered, best first
    first, second = kb_answer.label(hits[0]), kb_answer.label(hits[1])
    assert (
        f"room temperature [{first}], then goes in the fridge [{first}][{second}]"
        in (body["answer"])
    )
    assert [c["label"] for c in body["citations"]] == [first, second]
    assert body["dropped_citations"] == ["[secret/plans.md:1-3]", "[7]"]
    assert labels_in(body["answer"]) <= {kb_answer.label(h) for h in hits}


@pytest.fixture
def chat_server() -> Iterator[tuple[str, list[dict]]]:
    """A small OpenAI-compatible chat server on 127.0.0.1: /v1/chat/completions answers REPLY
    and records every request body."""
    received: list[dict] = []
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def completions(request: Request) -> dict:
        received.append(await request.json())
        message = {"role": "assistant", "content": REPLY}
        return {"id": "x", "object": "chat.completion", "model": "local",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}  # fmt: skip

    with serve_in_thread(app) as base:
        yield f"{base}/v1", received


def test_without_sampling_llm_url_writes_the_answer(
    embedder_transport, store_copy, chat_server
) -> None:
    url, received = chat_server
    settings = make_settings(
        IN_PROCESS_EMBED_URL, store_copy(), MCP_PORT=free_port(), LLM_URL=url, LLM_MODEL="llama3.2"
    )
    hits = retrieved(settings, 3, embedder_transport)
    with serve_in_process(settings, transport=embedder_transport) as server:
        result = call_tool(server.url, "answer_question", {"question": QUESTION, "k": 3})
    body = tool_answer(result)
    assert body["written_by"] == "llm_url"
    assert received[0]["model"] == "llama3.2"
    assert received[0]["messages"][0]["role"] == "system"
    assert f"[1] {kb_answer.label(hits[0])}" in received[0]["messages"][1]["content"]
    assert labels_in(body["answer"]) <= {kb_answer.label(h) for h in hits}
    assert "[7]" in body["dropped_citations"]


def test_with_no_model_at_all_the_error_says_how_to_enable_one(
    embedder_transport, store_copy
) -> None:
    settings = make_settings(IN_PROCESS_EMBED_URL, store_copy(), MCP_PORT=free_port())
    with serve_in_process(settings, transport=embedder_transport) as server:
        message = error_text(call_tool(server.url, "answer_question", {"question": QUESTION}))
    assert "LLM_URL" in message and "sampling" in message


def test_a_citation_of_anything_not_retrieved_cannot_survive() -> None:
    hits = [
        Hit(text="a", source="notes/a.md", score=1.0, line_start=3, line_end=5),
        Hit(text="b", source="notes/b.md", score=0.5, chunk_index=2),
    ]
    allowed = {"notes/a.md:3-5", "notes/b.md:chunk2"}
    attempts = [
        "x [0] y [3] z [2, 9] [1;1]",
        "[notes/a.md:3-5] is real, [notes/a.md:3-6] and [../etc/passwd:1] are not",
        "[ 1 ] spaced, [12345678901234567890] huge, [notes/b.md:chunk2] copied, [1][x:y]",
    ]
    for raw in attempts:
        cited = kb_answer.cite(raw, hits)
        assert labels_in(cited.text) <= allowed, cited.text
        assert {kb_answer.label(h) for h in cited.cited} <= allowed
    first = kb_answer.cite(attempts[0], hits)
    assert first.text == "x y z [notes/b.md:chunk2] [notes/a.md:3-5][notes/a.md:3-5]"
    assert first.dropped == ["[0]", "[3]", "[9]"]


def test_query_py_answer_prints_the_cited_answer_with_llm_url(
    embedder_url: str, store_copy, chat_server, tmp_path: Path
) -> None:
    url, _ = chat_server
    settings = make_settings(embedder_url, store_copy(), **local_dirs(tmp_path))
    hits = retrieved(settings, 5)
    env = script_env(settings, LLM_URL=url)
    proc = run_script("query.py", "--answer", QUESTION, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"[{kb_answer.label(hits[0])}]" in proc.stdout
    assert "dropped" in proc.stdout and "[secret/plans.md:1-3]" in proc.stdout


def test_query_py_answer_without_llm_url_names_the_setting(
    embedder_url: str, store_copy, tmp_path: Path
) -> None:
    settings = make_settings(embedder_url, store_copy(), **local_dirs(tmp_path))
    proc = run_script("query.py", "--answer", QUESTION, env=script_env(settings), cwd=tmp_path)
    assert proc.returncode != 0 and "LLM_URL" in proc.stderr


def test_answer_question_takes_every_filter_and_retrieves_only_what_they_keep(
    embedder_transport, store_copy, chat_server
) -> None:
    url, received = chat_server
    settings = make_settings(IN_PROCESS_EMBED_URL, store_copy(), MCP_PORT=free_port(), LLM_URL=url)
    with serve_in_process(settings, transport=embedder_transport) as server:
        arguments = {t["name"]: set(t["inputSchema"]["properties"]) for t in list_tools(server.url)}

        def answer(**filters: Any) -> dict[str, Any]:
            result = call_tool(server.url, "answer_question", {"question": QUESTION, **filters})
            assert not result.is_error, error_text(result)
            return tool_answer(result)

        garden = answer(k=3, path="garden/")
        dated = answer(k=3, date_from="2024-01-01", all_tags=["Recipes"])
        videos = answer(kind="video", max_duration="10m")
    assert arguments["answer_question"] == {"question", "k"} | {spec.name for spec in FILTERS}
    assert {c["source"] for c in garden["citations"]} == {"garden/tomatoes.md"}
    prompt = received[0]["messages"][1]["content"]
    assert "garden/tomatoes.md" in prompt and "cooking/" not in prompt
    assert {c["source"] for c in dated["citations"]} == {"cooking/kimchi.md"}
    assert (videos["written_by"], videos["citations"]) == ("none", [])  # no videos: no answer
    assert len(received) == 2  # nothing retrieved, nothing sent to LLM_URL


def test_answer_question_names_a_bad_filter_exactly_as_search_notes_does(
    embedder_transport, store_copy
) -> None:
    settings = make_settings(IN_PROCESS_EMBED_URL, store_copy(), MCP_PORT=free_port())
    with serve_in_process(settings, transport=embedder_transport) as server:
        for bad in BAD_FILTERS:
            search = error_text(call_tool(server.url, "search_notes", {"query": QUESTION, **bad}))
            answer = error_text(
                call_tool(server.url, "answer_question", {"question": QUESTION, **bad})
            )
            assert "validation error" in answer and next(iter(bad)) in answer, answer
            assert answer == search.replace("search_notes", "answer_question"), bad
