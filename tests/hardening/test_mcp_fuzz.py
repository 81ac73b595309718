"""Hypothesis-generated tool arguments through the real MCP SDK client against a real server
process (`python mcp/server.py`, MiniLM embedder, embedded Qdrant copy): strings with NUL, huge
`k`, nested junk, invalid dates, 100 KB queries, unknown tags and argument names. The server
never crashes, never logs a traceback, and every failure is a tool error naming an argument."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from mcp_fixtures import ServerProcess, call_tool, error_text, results

SEARCH_ARGUMENTS = ("query", "k", "tags", "all_tags", "path", "mode", "per_note",
                    "date_from", "date_to", "ingested_from", "ingested_to")  # fmt: skip
DELETED_ARGUMENTS = ("since", "cause")

hostile_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from("a\x00\u202e\u200b\U000e0041 /.-:T"), max_size=40),
    st.sampled_from(["", "\x00", "kimchi\x00", "../../etc/passwd", "2024-13-45", "yesterday",
                     "2024-02-30", "9999-99-99T99:99", "-1", "NaN", "a" * 100_000]),
)  # fmt: skip
junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | hostile_text,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)
tag_lists = st.lists(
    st.one_of(hostile_text, st.sampled_from(["recipes", "no-such-tag"])), max_size=5
)


def _argument(name: str) -> st.SearchStrategy[Any]:
    specific = {
        "query": st.one_of(hostile_text, st.sampled_from(["kimchi", "how do I bake bread"])),
        "k": st.integers(min_value=-(10**40), max_value=10**40),
        "tags": tag_lists,
        "all_tags": tag_lists,
        "mode": st.sampled_from(["hybrid", "dense", "keyword", "HYBRID", "sql"]),
        "per_note": st.integers(min_value=-5, max_value=10**12),
        "cause": st.sampled_from(["user", "file_deleted", "cosmic rays"]),
    }
    return st.one_of(specific.get(name, hostile_text), junk)


def _arguments(names: tuple[str, ...], required: tuple[str, ...]) -> st.SearchStrategy[dict]:
    chosen = st.fixed_dictionaries(
        {n: _argument(n) for n in required},
        optional={n: _argument(n) for n in names if n not in required},
    )
    extra = st.dictionaries(st.sampled_from(["limit", "filter", "q", "\x00"]), junk, max_size=1)
    return st.builds(lambda a, b: {**b, **a}, chosen, extra)


calls = st.one_of(
    st.tuples(st.just("search_notes"), _arguments(SEARCH_ARGUMENTS, ("query",))),
    st.tuples(st.just("list_deleted"), _arguments(DELETED_ARGUMENTS, ())),
    st.tuples(st.just("search_notes"), st.dictionaries(st.text(max_size=8), junk, max_size=3)),
)


@pytest.fixture(scope="module")
def server(start_server, embedder_url: str, store_copy) -> ServerProcess:
    return start_server(EMBED_URL=embedder_url, QDRANT_PATH=str(store_copy()))


def _check(server: ServerProcess, tool: str, arguments: dict[str, Any]) -> None:
    result = call_tool(server.url, tool, arguments)  # a crash or protocol error raises here
    if result.is_error:
        text = error_text(result)
        named = [n for n in (*SEARCH_ARGUMENTS, *DELETED_ARGUMENTS, *arguments) if n and n in text]
        assert named, f"{tool}({list(arguments)}) failed without naming an argument: {text[:300]}"
    else:
        assert tool != "search_notes" or isinstance(results(result), list)


def test_generated_arguments_never_crash_the_server_and_every_error_names_an_argument(
    server: ServerProcess,
) -> None:
    @settings(
        max_examples=40,  # each call is a real MCP session over HTTP; CI-sized
        deadline=None,
        database=None,
        derandomize=True,  # the same arguments on every run: a failure replays
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(call=calls)
    @example(call=("search_notes", {"query": "kim\x00chi", "path": "\x00"}))
    @example(call=("search_notes", {"query": "kimchi", "k": 10**30}))
    @example(call=("search_notes", {"query": {"nested": [[{"junk": None}]]}}))
    @example(call=("search_notes", {"query": "bread", "date_from": "2024-02-30", "date_to": "x"}))
    @example(call=("search_notes", {"query": "q" * 100_000}))
    @example(call=("search_notes", {"query": "kimchi", "tags": ["no-such-tag"], "all_tags": [[]]}))
    @example(call=("list_deleted", {"since": "\x00", "cause": ["user"]}))
    def one(call: tuple[str, dict[str, Any]]) -> None:
        _check(server, *call)

    one()
    # 0 crashes: the same process still answers a normal search, and never logged a traceback
    hits = results(call_tool(server.url, "search_notes", {"query": "kimchi"}))
    assert hits and hits[0]["source"] == "cooking/kimchi.md"
    assert server.proc.poll() is None and "Traceback" not in server.log
