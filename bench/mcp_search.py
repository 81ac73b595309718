"""`search_notes` over MCP against the work it wraps (the query's embedding + the store query),
on 10,000 chunks in embedded storage, measured in the same run.

    uv run bench/mcp_search.py            # 10,000 chunks, 40 queries each way
    uv run bench/mcp_search.py --quick    # 500 chunks, 10 queries
    uv run bench/mcp_search.py --json     # ... and the figures as JSON, last

First, in this process: each query embedded (the embedder request itself, past the client's
query-vector cache) and then searched (`Store.query`, hybrid, one chunk per note, k 5: what
search_notes asks for). Then the same queries through `python mcp/server.py` (a real process on
the same folder, once this process has closed it) with the MCP SDK's client over streamable
HTTP, one session for all calls. Every query is new, so the server's 60 s query-vector cache
never answers: the ratio compares like with like. Last, one query repeated: the cached figure
(what an assistant repeating a search with other filters gets). Beside them, in this process,
kb.search.search itself (what search_notes runs: the code collection too, confidence,
backlinks, staleness) on other new queries, with its round trips to the embedder and the store
counted on the real engine and client.

The collection is synthetic (bench/scale.py's chunks at the embedder's dimension, under its
model name) and left as ingest.py leaves it; the embedder is real (EMBED_URL, or MiniLM).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.cold_query import COLLECTION, build
from bench.common import REPO_ROOT, CountedEngine, cpu_name, embedder, format_table, free_port
from kb.app.process import Child, ChildError
from kb.embedding.client import EmbedClient
from kb.embedding.keywords import query_vector
from kb.search import Searcher, SearchRequest, search
from kb.store.points import Store

TARGET_RATIO = 1.3
K = 5
WORDS = [
    "shock",
    "wave",
    "swept",
    "wing",
    "boundary",
    "layer",
    "heat",
    "transfer",
    "pressure",
    "drag",
    "lift",
    "flutter",
    "nozzle",
    "flow",
    "turbulence",
    "laminar",
    "supersonic",
    "subsonic",
    "buckling",
    "panel",
    "cylinder",
]


def queries(n: int) -> list[str]:
    """n distinct questions (none repeats, so no cache answers one)."""
    return [
        f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7 + 3) % len(WORDS)]} question {i}" for i in range(n)
    ]


def p50_ms(times: Sequence[float]) -> float:
    return statistics.median(times) * 1000


def direct(folder: Path, url: str, asked: list[str]) -> list[float]:
    """Seconds per query: the embedder request plus Store.query, in this process."""
    times = []
    with EmbedClient(url) as client, Store.open(COLLECTION, path=folder) as store:
        client.embed_query("warm up")  # a first request opens the connection
        for text in asked:
            started = time.perf_counter()
            dense = client._embed([text], "query")[0]  # the request itself: no cache
            hits = store.query(K, dense=dense, keyword=query_vector(text), per_note=1)
            times.append(time.perf_counter() - started)
            assert hits, "a query found nothing"
    return times


def whole_search(folder: Path, url: str, asked: list[str]) -> tuple[list[float], float, float]:
    """Seconds per kb.search.search (what search_notes runs: both collections, confidence,
    backlinks, staleness) in this process, and the store and embedder requests per search,
    counted on the real engine and client after a first search (which checks the collection
    once per process)."""
    times = []
    with (
        EmbedClient(url) as client,
        Store.open(COLLECTION, path=folder) as opened,
    ):
        engine = CountedEngine(opened._engine)
        store = Store(engine, COLLECTION)
        look = Searcher(store, client, (store.beside("bench_code"), client))
        search(look, SearchRequest("warm up"))
        engine.calls.clear()
        embedded = client.calls + client.rerank_calls
        for text in asked:
            started = time.perf_counter()
            assert search(look, SearchRequest(text, K)).hits, "a query found nothing"
            times.append(time.perf_counter() - started)
        store_trips = len(engine.calls) / len(asked)
        embed_trips = (client.calls + client.rerank_calls - embedded) / len(asked)
    return times, store_trips, embed_trips


def over_mcp(url: str, asked: list[str]) -> list[float]:
    """Seconds per search_notes call through the SDK client, one session for all."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> list[float]:
        times = []
        http = httpx2.AsyncClient(timeout=60.0)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            await client.call_tool("search_notes", {"query": "warm up", "k": K})
            for text in asked:
                started = time.perf_counter()
                result = await client.call_tool("search_notes", {"query": text, "k": K})
                times.append(time.perf_counter() - started)
                if result.is_error:
                    raise SystemExit(f"error: search_notes failed: {result.content}")
        return times

    return anyio.run(run)


def server(folder: Path, embed_url: str, state: Path) -> tuple[Child, str]:
    """`python mcp/server.py` on a free loopback port over `folder`, listening: (child, base)."""
    port = free_port()
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("QDRANT", "MCP", "EMBED"))}
    env = {
        **keep,
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(port),
        "MCP_TOKEN": "",
        "QDRANT_PATH": str(folder),
        "EMBED_URL": embed_url,
        "COLLECTION": COLLECTION,
        "STATE_DIR": str(state),
        "NOTES_DIR": str(state.parent / "notes"),
        "LOG_LEVEL": "WARNING",
    }
    (state.parent / "notes").mkdir(exist_ok=True)
    argv = [sys.executable, str(REPO_ROOT / "mcp" / "server.py")]
    child = Child("MCP server", argv, env=env, log=state.parent / "server.log")
    base = f"http://127.0.0.1:{port}"
    try:
        child.wait_ready(f"{base}/health", 120, ready=range(100, 600))  # any answer: listening
    except ChildError:
        child.stop()
        raise
    return child, base


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="500 chunks, 10 queries")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON, last")
    parser.add_argument("--queries", type=int, help="queries each way (40; --quick 10)")
    args = parser.parse_args()
    n, count = (500, 10) if args.quick else (10_000, 40)
    count = args.queries or count
    print(f"CPU: {cpu_name()}; load average {os.getloadavg()[0]:.1f}")
    asked = queries(count)
    with embedder() as embed_url, tempfile.TemporaryDirectory(prefix="kb-mcp-bench-") as tmp:
        folder = Path(tmp) / "qdrant"
        started = time.perf_counter()
        build(folder, embed_url, n)
        print(f"{n:,} chunks stored and indexed in {time.perf_counter() - started:.0f}s")
        inner = direct(folder, embed_url, asked)
        whole, store_trips, embed_trips = whole_search(
            folder, embed_url, queries(2 * count)[count:]
        )
        try:
            child, base = server(folder, embed_url, Path(tmp) / "state")
        except ChildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        with child:
            mcp = over_mcp(f"{base}/mcp", asked)
            repeated = over_mcp(f"{base}/mcp", [asked[0]] * count)  # within the 60 s cache
    rows = [
        ["embedding + store query (in process)", f"{p50_ms(inner):.1f}"],
        ["kb.search.search (in process, what search_notes runs)", f"{p50_ms(whole):.1f}"],
        ["search_notes over MCP, new queries", f"{p50_ms(mcp):.1f}"],
        ["search_notes over MCP, one query repeated", f"{p50_ms(repeated):.1f}"],
    ]
    print(format_table(["k 5, hybrid, one per note", "p50 ms"], rows))
    ratio = p50_ms(mcp) / p50_ms(inner)
    print(f"search_notes / (embedding + store query) on {n:,} chunks: {ratio:.2f}x "
          f"(target {TARGET_RATIO}x)")  # fmt: skip
    print(f"round trips per search: {embed_trips:g} to the embedder, {store_trips:g} to the store "
          f"(both collections; the code one not made)")  # fmt: skip
    if args.json:
        print(
            json.dumps(
                {
                    "chunks": n,
                    "direct_p50_ms": p50_ms(inner),
                    "mcp_p50_ms": p50_ms(mcp),
                    "mcp_cached_p50_ms": p50_ms(repeated),
                    "search_p50_ms": p50_ms(whole),
                    "store_round_trips": store_trips,
                    "embedder_round_trips": embed_trips,
                    "ratio": ratio,
                    "target_ratio": TARGET_RATIO,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
