"""Search your notes from the terminal.

    uv run query.py "how do I make kimchi?"           # the 5 closest chunks
    uv run query.py "kimchi" -k 10 --tags "korean cuisine,recipes" --json

Prints score, source file (with line range) and the start of each chunk; `--json` prints one
object `{"results": [...]}` with the same fields as the MCP tool `search_notes`. Exits non-zero
with one `error:` line when the embedder or Qdrant is down.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from embed_client import EmbedClient, EmbedError
from kb.search import MAX_K, Hit, search
from kb.settings import get_settings
from kb.store import Store, StoreError

PREVIEW_CHARS = 200


def format_hit(rank: int, hit: Hit) -> str:
    where = hit.source or "(unknown source)"
    if hit.line_start is not None:
        where += f":{hit.line_start}-{hit.line_end}"
    tags = f"  [{', '.join(hit.tags)}]" if hit.tags else ""
    text = " ".join(hit.text.split())
    preview = text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
    return f"{rank}. {hit.score:.3f}  {where}{tags}\n   {preview}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Search your ingested notes.")
    parser.add_argument("query", help="what to look for, in your own words")
    parser.add_argument("-k", type=int, default=5, help=f"number of results, 1-{MAX_K} (5)")
    parser.add_argument(
        "--tags",
        action="append",
        default=[],
        help="only notes with any of these tags (comma-separated; may repeat)",
    )
    parser.add_argument("--json", action="store_true", help='print {"results": [...]} as JSON')
    args = parser.parse_args(argv)
    if not args.query.strip():
        parser.error("the query is empty")
    if not 1 <= args.k <= MAX_K:
        parser.error(f"-k must be between 1 and {MAX_K}")
    tags = [tag for value in args.tags for tag in value.split(",")]
    try:
        settings = get_settings()
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "settings"
        print(f"error: {where}: {error['msg']}", file=sys.stderr)
        return 2

    try:
        with Store.open(settings) as store, EmbedClient(settings=settings) as client:
            hits = search(store, client, args.query, k=args.k, tags=tags)
    except EmbedError as exc:
        print(f"error: {exc.message} (EMBED_URL)", file=sys.stderr)
        return 1
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    if args.json:
        print(json.dumps({"results": [hit.to_dict() for hit in hits]}, ensure_ascii=False))
    elif not hits:
        print("no results")
    else:
        print("\n".join(format_hit(rank, hit) for rank, hit in enumerate(hits, 1)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
