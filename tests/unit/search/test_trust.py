"""Answers a user can check (issue 32): `explain`, `confidence` and `no_good_match`, `stale`,
the `max_chars` budget and `why_not_found`, through the MCP server (real SDK client over HTTP)
and query.py, on notes ingested by the real ingest with the MiniLM embedder."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import free_port
from ingest_fixtures import make_settings, run_script, script_env, write
from mcp_fixtures import (
    PYTEST,
    call_tool,
    error_text,
    results,
    serve_in_process,
    text_of,
    tool_answer,
)

from kb.app import handoff
from kb.app.backend import embed_client, open_store, searcher
from kb.app.ingest import run
from kb.core.settings import Settings
from kb.ingest import lifecycle
from kb.search import SearchRequest, search

KIMCHI = """---
tags: [recipes, korean]
---
# Kimchi

Salt a napa cabbage for two hours, rinse it, then rub in a paste of gochugaru, garlic,
ginger and fish sauce. Ferment it at room temperature for two days, then refrigerate.
"""
TOMATOES = """---
tags: [gardening]
---
# Tomatoes

Tomato seedlings go outside after the last frost, deep enough to bury part of the stem.
Pinch out the side shoots and water at the base, never on the leaves.
"""
RUST = """# Rust ownership

In Rust every value has one owner; when the owner goes out of scope the value is dropped.
Borrowing lends access without moving ownership, and the borrow checker enforces it.
"""
NOTES = {
    "cooking/kimchi.md": KIMCHI,
    "garden/tomatoes.md": TOMATOES,
    "code/rust.md": RUST,
    "code/pytest-fixtures.md": PYTEST,
    "gone/old.md": "# Old\n\nA note about the old bicycle shed, deleted since.\n",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder_transport) -> Settings:
    """NOTES ingested (one soft-deleted), then files the index does not hold: one waiting in the
    inbox, a hidden one, a binary one, a private one."""
    root = tmp_path_factory.mktemp("trust")
    settings = make_settings(root, IN_PROCESS_EMBED_URL, MCP_PORT=free_port(), MCP_TOKEN="")
    for name, text in NOTES.items():
        write(settings.NOTES_DIR / name, text)
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        assert sorted(run(settings, client, store).ingested) == sorted(NOTES)
        assert lifecycle.soft_delete(store, "gone/old.md")
    write(settings.NOTES_DIR / "later/waiting.md", "# Waiting\n\nDropped after the ingest.\n")
    write(settings.NOTES_DIR / "cooking/.hidden.md", "# Hidden\n\nNever listed.\n")
    write(settings.NOTES_DIR / "cooking/broken.md", b"\x00\x01binary\x00")
    write(settings.NOTES_DIR / "cooking/mine.md", "---\nprivate: true\n---\n# Mine\n\nSecret.\n")
    return settings


@pytest.fixture(scope="module")
def server(corpus: Settings, embedder_transport: httpx.BaseTransport) -> Iterator[str]:
    """The MCP server holding the corpus's storage, announced in STATE_DIR/server.json as
    mcp/server.py announces itself: query.py finds it there and goes through it."""
    announced = handoff.announce(corpus)
    try:
        with serve_in_process(corpus, announced.key, embedder_transport) as served:
            yield served.url
    finally:
        handoff.withdraw(corpus, announced)


def search_tool(url: str, **arguments: object) -> dict:
    found = call_tool(url, "search_notes", arguments)
    results(found)  # fails, showing the error, on a tool error
    return tool_answer(found)


def test_explain_gives_each_result_its_place_in_every_ranking_over_mcp(server: str) -> None:
    body = search_tool(
        server, query="how long does kimchi ferment", explain=True, k=3,
        alternates=["keyword: gochugaru"], tags=["recipes", "gardening"],
    )  # fmt: skip
    first = body["results"][0]
    assert first["source"] == "cooking/kimchi.md"
    why = first["explain"]
    assert why["semantic_rank"] == 1 and why["keyword_rank"] == 1 and why["fused_rank"] == 1
    assert 0 < why["semantic_score"] <= 1 and why["keyword_score"] > 0
    assert why["found_by"] == ["query", "alternate: keyword: gochugaru"]
    assert why["filters"] == {"tags": ["recipes", "gardening"]}
    assert why["collection"] == "notes" and why["indexed_at"] == first["date_ingested"]
    assert "rerank_rank" not in why  # the test embedder serves no reranker
    assert [r["explain"]["fused_rank"] for r in body["results"]] == [1, 2][: len(body["results"])]
    assert "explain" not in search_tool(server, query="kimchi")["results"][0]


def test_a_covered_question_is_confident_and_an_uncovered_one_is_no_good_match(
    server: str,
) -> None:
    covered = search_tool(server, query="how do I make kimchi with napa cabbage")
    assert covered["no_good_match"] is False
    best = covered["results"][0]
    assert best["source"] == "cooking/kimchi.md" and best["confidence"] > 0.5
    others = [r["confidence"] for r in covered["results"][1:]]
    assert all(c < best["confidence"] for c in others)
    uncovered = search_tool(server, query="the rules of cricket and how a test match is scored")
    assert uncovered["no_good_match"] is True
    assert all(r["confidence"] < 0.5 for r in uncovered["results"])


def test_max_chars_packs_adjacent_chunks_of_a_note_into_one_passage_within_the_budget(
    server: str,
) -> None:
    body = search_tool(server, query="pytest fixture scope, teardown after yield, parametrised",
                       max_chars=2500)  # fmt: skip
    passages = body["results"]
    assert sum(len(p["text"]) for p in passages) <= 2500
    assert len({p["source"] for p in passages}) == len(passages)  # per_note 1: one each
    pytest_note = next(p for p in passages if p["source"] == "code/pytest-fixtures.md")
    single = search_tool(server, query="pytest fixture scope", k=20, per_note=0)["results"]
    one_chunk = max(r["line_end"] - r["line_start"] for r in single
                    if r["source"] == "code/pytest-fixtures.md")  # fmt: skip
    assert pytest_note["line_end"] - pytest_note["line_start"] > one_chunk  # chunks merged
    refused = call_tool(server, "search_notes", {"query": "kimchi", "max_chars": 10})
    assert "max_chars must be between 200" in error_text(refused)


def test_why_not_found_tells_each_notes_story_over_mcp(server: str) -> None:
    def why(source: str, **more: object) -> dict:
        found = call_tool(server, "why_not_found", {"source": source, **more})
        assert not found.is_error, text_of(found)
        return tool_answer(found)

    indexed = why("cooking/kimchi.md", query="fermenting cabbage", filters={"tags": ["gardening"]})
    assert indexed["state"] == "indexed" and indexed["chunks"] >= 1 and indexed["stale"] is False
    assert {r["mode"] for r in indexed["ranks"]} == {"hybrid", "semantic", "keyword"}
    assert all(r["rank"] == 1 for r in indexed["ranks"])
    assert indexed["cut_by"] == ["tags"]
    deleted = why("gone/old.md")
    assert deleted["state"] == "deleted" and deleted["deleted_cause"] == "user"
    assert why("later/waiting.md")["state"] == "waiting"
    hidden = why("cooking/.hidden.md")
    assert hidden["state"] == "skipped" and hidden["gate"] == "hidden"
    broken = why("cooking/broken.md")
    assert broken["state"] == "failed" and "binary" in broken["failure"]
    assert why("cooking/mine.md")["state"] == "private"
    never = why("nowhere/at-all.md")
    assert never["state"] == "never_seen" and "no file nowhere/at-all.md" in never["story"][0]
    refused = call_tool(server, "why_not_found", {"source": "../etc/passwd"})
    assert "not a note's path" in error_text(refused)
    bad = call_tool(server, "why_not_found", {"source": "a.md", "filters": {"colour": "red"}})
    assert "filters" in error_text(bad)


def test_query_py_explains_and_packs_through_the_server_holding_the_store(
    server: str, corpus: Settings
) -> None:
    env = script_env(corpus)
    explained = run_script("query.py", "kimchi fermentation", "--explain", "-k", "2", env=env,
                           cwd=corpus.NOTES_DIR.parent)  # fmt: skip
    assert explained.returncode == 0, explained.stderr
    assert "why: semantic #1" in explained.stdout and "first stage #1" in explained.stdout
    assert "(confidence " in explained.stdout
    packed = run_script("query.py", "pytest fixtures", "--max-chars", "1500", "--json", env=env,
                        cwd=corpus.NOTES_DIR.parent)  # fmt: skip
    assert packed.returncode == 0, packed.stderr
    body = json.loads(packed.stdout)
    assert sum(len(r["text"]) for r in body["results"]) <= 1500
    assert body["no_good_match"] is False
    bad = run_script("query.py", "x", "--max-chars", "5", env=env, cwd=corpus.NOTES_DIR.parent)
    assert bad.returncode == 2 and "--max-chars must be between 200" in bad.stderr


def test_query_py_why_asks_the_server_holding_the_store_and_tells_the_notes_story(
    server: str, corpus: Settings
) -> None:
    env = script_env(corpus)
    told = run_script("query.py", "--why", "cooking/kimchi.md", "fermenting cabbage", "--json",
                      env=env, cwd=corpus.NOTES_DIR.parent)  # fmt: skip
    assert told.returncode == 0, told.stderr
    story = json.loads(told.stdout)
    assert story["state"] == "indexed" and story["chunks"] >= 1
    assert {r["mode"] for r in story["ranks"]} == {"hybrid", "semantic", "keyword"}
    deleted = run_script("query.py", "--why", "gone/old.md", env=env, cwd=corpus.NOTES_DIR.parent)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith("gone/old.md: deleted")


def test_the_dashboards_explain_box_shows_each_results_place_in_every_ranking(
    server: str,
) -> None:
    base = server.removesuffix("/mcp")
    plain = httpx.get(f"{base}/search", params={"q": "kimchi fermentation"})
    assert plain.status_code == 200 and 'class="explain"' not in plain.text
    page = httpx.get(f"{base}/search", params={"q": "kimchi fermentation", "explain": "on"})
    assert page.status_code == 200
    assert 'class="explain"' in page.text and "<dt>semantic</dt>" in page.text
    assert "<dt>first stage</dt><dd>#1 " in page.text and "<dt>indexed</dt>" in page.text
    assert 'name="explain" type="checkbox" value="on" checked' in page.text


def test_a_result_is_stale_once_its_file_changes_and_not_when_it_is_only_touched(
    tmp_path: Path, embedder_url: str
) -> None:
    settings = make_settings(tmp_path, embedder_url)
    for name in ("cooking/kimchi.md", "garden/tomatoes.md"):
        write(settings.NOTES_DIR / name, NOTES[name])
    with open_store(settings) as store, embed_client(settings) as client:
        run(settings, client, store)
        with embed_client(settings, code=True) as code_client:
            look = searcher(settings, store, client, code_client)
            request = SearchRequest("kimchi and tomatoes", k=2)
            assert {h.source: h.stale for h in search(look, request).hits} == {
                "cooking/kimchi.md": False, "garden/tomatoes.md": False,
            }  # fmt: skip
            kimchi = settings.NOTES_DIR / "ingested" / "cooking/kimchi.md"
            tomatoes = settings.NOTES_DIR / "ingested" / "garden/tomatoes.md"
            kimchi.write_text(KIMCHI + "\nAdd a pear for sweetness.\n", encoding="utf-8")
            later = time.time() + 10
            os.utime(tomatoes, (later, later))  # touched: same bytes, a new time
            stale = {h.source: h.stale for h in search(look, request).hits}
            assert stale == {"cooking/kimchi.md": True, "garden/tomatoes.md": False}
    done = run_script("query.py", "kimchi", "-k", "1", env=script_env(settings), cwd=tmp_path)
    assert done.returncode == 0 and "!stale" in done.stdout, done.stderr
    why = run_script("query.py", "--why", "cooking/kimchi.md", env=script_env(settings),
                     cwd=tmp_path)  # fmt: skip
    assert why.returncode == 0 and "cooking/kimchi.md: stale" in why.stdout, why.stderr
