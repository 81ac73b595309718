"""What the assistant's context pays for the MCP surface, in characters, as the client receives
it: `tools/list` as compact JSON (output schemas included), and `search_notes` results (every
content block plus the structured content) at the default k and at k=20.

    uv run bench/mcp_sizes.py                       # bench/notes_corpus (39 notes, 41 queries)
    uv run bench/mcp_sizes.py --notes DIR --queries FILE.jsonl

The notes are ingested by the real ingest code into a temporary embedded store, served by
`python mcp/server.py` (a real process) and asked through the MCP SDK's client; the queries are
the corpus's own (one JSON object with a "query" per line). No timing: sizes only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import REPO_ROOT, bench_settings, copy_notes, cpu_name, embedder, format_table
from bench.mcp_search import server
from kb.app import ingest
from kb.app.backend import embed_client, open_store
from kb.app.process import ChildError

CORPUS = REPO_ROOT / "bench" / "notes_corpus"
TOOLS_BUDGET, DEFAULT_K_BUDGET, K20_BUDGET = 15_000, 8_000, 40_000


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def received(result: Any) -> int:
    """Characters of a CallToolResult as a client receives it: every text block plus the
    structured content as compact JSON."""
    texts = sum(len(getattr(part, "text", "")) for part in result.content)
    structured = result.structured_content
    return texts + (len(compact(structured)) if structured is not None else 0)


def measure(url: str, asked: list[str], ks: list[int | None]) -> tuple[dict[str, int], dict]:
    """tools/list sizes (compact JSON: all, descriptions, input and output schemas) and the
    received size of each search_notes call per k (None: the tool's default)."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> tuple[dict[str, int], dict]:
        http = httpx2.AsyncClient(timeout=120.0)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            listed = (await client.list_tools()).tools
            tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed]
            sizes = {
                "tools": len(tools),
                "tools_list": len(compact(tools)),
                "descriptions": sum(len(t["description"]) for t in tools),
                "input_schemas": sum(len(compact(t["inputSchema"])) for t in tools),
                "output_schemas": sum(len(compact(t.get("outputSchema", {}))) for t in tools),
            }
            per_k: dict[str, list[int]] = {}
            for k in ks:
                key = "default" if k is None else str(k)
                for text in asked:
                    arguments: dict[str, Any] = {"query": text} | ({} if k is None else {"k": k})
                    result = await client.call_tool("search_notes", arguments)
                    if result.is_error:
                        raise SystemExit(f"error: search_notes failed: {result.content}")
                    per_k.setdefault(key, []).append(received(result))
        return sizes, per_k

    return anyio.run(run)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=Path, default=CORPUS / "notes", help="the notes folder")
    parser.add_argument("--queries", type=Path, default=CORPUS / "queries.jsonl")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON, last")
    args = parser.parse_args()
    lines = args.queries.read_text(encoding="utf-8").splitlines()
    asked = [json.loads(line)["query"] for line in lines if line.strip()]
    print(f"CPU: {cpu_name()}")
    with embedder() as embed_url, tempfile.TemporaryDirectory(prefix="kb-mcp-sizes-") as tmp:
        root = Path(tmp)
        notes = copy_notes(args.notes, root / "notes")
        settings = bench_settings(root / "notes", root / "qdrant", embed_url)
        with embed_client(settings) as client, open_store(settings) as store:
            summary = ingest.run(settings, client, store)
        print(f"{notes} files ingested ({len(summary.failed)} failed), {len(asked)} queries")
        try:
            child, base = server(root / "qdrant", embed_url, root / "bench-state")
        except ChildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        with child:
            sizes, per_k = measure(f"{base}/mcp", asked, [None, 20])
    print(
        f"tools/list, {sizes['tools']} tools: {sizes['tools_list']:,} characters compact "
        f"(budget {TOOLS_BUDGET:,}); descriptions {sizes['descriptions']:,}, input schemas "
        f"{sizes['input_schemas']:,}, output schemas {sizes['output_schemas']:,}"
    )
    budgets = {"default": DEFAULT_K_BUDGET, "20": K20_BUDGET}
    rows = [
        [f"k {k}", f"{statistics.median(v):,.0f}", f"{max(v):,}", f"{budgets[k]:,}"]
        for k, v in per_k.items()
    ]
    print(format_table(["search_notes", "median chars", "max chars", "budget"], rows))
    if args.json:
        print(json.dumps({**sizes, **{f"search_k_{k}": v for k, v in per_k.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
