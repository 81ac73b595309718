"""A configured reranker that is not in the Hugging Face cache (the default RERANK_MODEL without
Docker): the embedder serves embeddings, every search runs unreranked, and every place a user
looks says so in one line with the command that fetches it — the embedder's and the MCP
server's /health, the status tool, search notes, the dashboard and query.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from helpers import EmbedderProcess, free_port
from ingest_fixtures import run_script, script_env
from mcp_fixtures import call_tool, make_settings, results, serve_in_process, tool_answer

MISSING = "cross-encoder/not-fetched-here"
FETCH = f"`uvx --from huggingface-hub hf download {MISSING}`"
LINE = (
    f"not reranked: RERANK_MODEL {MISSING} is not in the Hugging Face cache: fetch it with {FETCH}"
)


@pytest.fixture(scope="module")
def unfetched(start_embedder, minilm_path: Path, tmp_path_factory) -> EmbedderProcess:
    """MiniLM embeddings, and a RERANK_MODEL hub id absent from an empty Hugging Face cache."""
    return start_embedder({
        "EMBED_MODEL": str(minilm_path),
        "RERANK_MODEL": MISSING,
        "HF_HOME": str(tmp_path_factory.mktemp("empty-hf-cache")),
    })  # fmt: skip


def test_the_embedders_health_names_the_command_that_fetches_the_reranker(
    unfetched: EmbedderProcess,
) -> None:
    health = httpx.get(f"{unfetched.url}/health").json()
    assert health["status"] == "ok"  # embeddings are served
    assert health["rerank"]["status"] == "failed"
    assert f"not reranked: {health['rerank']['error']}".startswith(LINE)


def test_the_server_health_status_tool_and_searches_say_it_in_one_line(
    unfetched: EmbedderProcess, store_copy: Callable[[], Path]
) -> None:
    settings = make_settings(unfetched.url, store_copy(), MCP_PORT=free_port())
    with serve_in_process(settings) as server:
        health = httpx.get(f"{server.base}/health").json()
        status = tool_answer(call_tool(server.url, "status"))
        default = call_tool(server.url, "search_notes", {"query": "kimchi"})
        again = call_tool(server.url, "search_notes", {"query": "kimchi"})  # not asked again
        rerank_calls = server.backend.client.rerank_calls
    assert health["ok"] and health["embedder"]["problem"].startswith(LINE)
    assert status["reranker"].startswith(LINE)
    for found in (default, again):
        assert results(found) and all("rerank_score" not in r for r in results(found))
        note = tool_answer(found)["note"]
        assert note.startswith(LINE) and "\n" not in note
    assert rerank_calls == 1


def test_the_dashboard_says_it_on_the_embedder_card_and_searches_with_the_box_off(
    unfetched: EmbedderProcess, store_copy: Callable[[], Path], tmp_path: Path
) -> None:
    settings = make_settings(unfetched.url, store_copy(), MCP_PORT=free_port(),
                             NOTES_DIR=tmp_path, STATE_DIR=tmp_path / "state")  # fmt: skip
    with serve_in_process(settings) as server:
        card = httpx.get(f"{server.base}/status/panel", timeout=60)
        page = httpx.get(f"{server.base}/search", params={"q": "kimchi", "rerank": "on"},
                         timeout=60)  # fmt: skip
    assert card.status_code == 200 and 'id="reranker"' in card.text
    assert "hf download " + MISSING in card.text
    assert page.status_code == 200
    box = page.text.split('id="rerank"', 1)[1].split(">", 1)[0]
    assert "disabled" in box and "checked" not in box
    assert 'class="hit"' in page.text and "answered 500" not in page.text
    assert "not reranked: RERANK_MODEL " + MISSING in page.text


def test_query_explain_prints_the_line_once_beside_its_results(
    unfetched: EmbedderProcess, store_copy: Callable[[], Path], tmp_path: Path
) -> None:
    settings = make_settings(unfetched.url, store_copy(), NOTES_DIR=tmp_path)
    result = run_script("query.py", "kimchi", "--explain", env=script_env(settings),
                        cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("1.") and "why: " in result.stdout
    [line] = [x for x in result.stderr.splitlines() if x.startswith("note: ")]
    assert line.startswith(f"note: {LINE}")
