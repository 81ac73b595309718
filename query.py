"""Search your notes from the terminal.

    uv run query.py "how do I make kimchi?"           # the 5 best notes (hybrid search)
    uv run query.py "kimchi" -k 10 --tags "korean cuisine,recipes" --json
    uv run query.py "kb.store.points.upsert_points" --mode keyword --path projects/
    uv run query.py "trip ideas" --from 2024-01-01 --to 2024-06-30 --per-note 3
    uv run query.py "chess" --kind video --max-duration 10m    # saved videos
    (docs/guide/youtube.md)
    uv run query.py --answer "how long does kimchi ferment?"   # cited answer (needs LLM_URL)
    uv run query.py "where is the ingest lock taken" --domain code
    uv run query.py --show vault/report.pdf:40           # an indexed note's lines from 40
    uv run query.py --related "vault/Projects/Alpha.md"   # its backlinks, links, nearest notes
    uv run query.py "kimchi" --explain                   # how each result was found
    uv run query.py "kimchi" --max-chars 4000            # the best passages within a budget
    uv run query.py --why vault/kimchi.md "fermenting"   # why a note was not found

Prints score, confidence, source file (with line range and heading path) and the start of each
chunk, `stale` when the file changed since it was indexed and a last line when nothing is a good
match; `--json` prints one object `{"results": [...], "no_good_match": ...}` with the same
fields as the MCP tool `search_notes`. Exits non-zero with one `error:` line when the embedder
or Qdrant is down (keyword mode needs no embedder).

Embedded storage (QDRANT_PATH) opens in one process at a time: while another process holds the
folder, the search goes through the running MCP server (its `search_notes` tool at MCP_URL,
by default MCP_HOST:MCP_PORT) and prints the same output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from kb.app.backend import embed_client, open_store, read_config, searcher
from kb.app.cli import fail, script
from kb.app.query_options import parse_args
from kb.app.query_print import format_hit, format_related, print_answer, print_results
from kb.core.errors import StoreUnavailable
from kb.core.settings import Settings, get_settings
from kb.search import TOOL_MAX_K, SearchRequest, search
from kb.search.read import read_item
from kb.search.related import related
from kb.search.rerank import Reranked

if TYPE_CHECKING:
    from kb.app import remote

__all__ = ["format_hit", "main", "parse_args"]  # what tests/ call on the script


def held_message(settings: Settings, failure: remote.RemoteError) -> str:
    """What to do when the storage folder is held and the MCP server did not answer the search."""
    folder = Path(settings.QDRANT_PATH).expanduser().resolve()
    held = f"embedded Qdrant in {folder} (QDRANT_PATH) is in use by another process"
    url = settings.mcp_url
    if failure.reachable:
        return f"{held}; asked the MCP server at {url} instead: {failure}"
    return (
        f"{held}, and no MCP server answers at {url} ({failure}): if the MCP server holds the "
        "folder, set MCP_URL (or MCP_HOST/MCP_PORT) to where it listens; otherwise wait for "
        "the other process (an ingest?) to finish, or stop it"
    )


def through_server(settings: Settings, request: SearchRequest) -> Reranked:
    """The same search by the MCP server that holds the embedded storage folder."""
    if request.k > TOOL_MAX_K:
        print(f"note: through the MCP server at most {TOOL_MAX_K} results", file=sys.stderr)
    from kb.app import remote  # the MCP SDK: loaded only when the server is asked

    return remote.search_notes(settings.mcp_url, settings.MCP_TOKEN, request)


@script
def main(argv: Sequence[str] | None = None) -> int:
    args, request = parse_args(argv)
    settings = get_settings()
    if args.answer and not settings.LLM_URL:
        from kb.search.answer import NO_MODEL

        return fail(f"--answer: {NO_MODEL}", 2)
    if request is None and args.why is not None:
        return why(settings, args)
    if request is None:
        if args.related is not None:
            return print_related(settings, args.related, args.k, as_json=args.json)
        return show(settings, args.show)
    try:
        with (
            open_store(settings) as store,
            embed_client(settings) as client,
            embed_client(settings, code=True) as code_client,
        ):
            found = search(searcher(settings, store, client, code_client), request)
    except StoreUnavailable:
        if not settings.QDRANT_PATH:
            raise
        # The folder is held, most likely by the MCP server: ask it.
        from kb.app import remote

        try:
            found = through_server(settings, request)
        except remote.RemoteError as failure:
            return fail(held_message(settings, failure))

    if args.answer:
        return print_answer(settings, args, found.hits)
    return print_results(found, as_json=args.json)


def why(settings: Settings, args: argparse.Namespace) -> int:
    """`--why NOTE [QUERY]`: the note's story (kb.app.why), as the MCP tool why_not_found."""
    from dataclasses import asdict

    from kb.app.why import why_not_found

    query = args.query.strip() or None
    try:
        with (
            open_store(settings) as store,
            embed_client(settings) as client,
            embed_client(settings, code=True) as code_client,
        ):
            try:
                story = asdict(why_not_found(settings, searcher(settings, store, client,
                                                                code_client),
                                             args.why, query, args.filters,
                                             args.per_note or None))  # fmt: skip
            except ValueError as exc:
                return fail(f"--why: {exc}", 2)
    except StoreUnavailable:
        if not settings.QDRANT_PATH:
            raise
        from kb.app import remote  # the folder is held, most likely by the MCP server: ask it

        sent: dict[str, object] = {"source": args.why, "query": query}
        if args.filters.arguments():
            sent["filters"] = args.filters.arguments()
        try:
            story = remote.call(settings.mcp_url, settings.MCP_TOKEN, "why_not_found", sent)
        except remote.RemoteError as failure:
            return fail(held_message(settings, failure))
    if args.json:
        print(json.dumps(story, ensure_ascii=False))
        return 0
    print(f"{story['source']}: {story['state']}")
    lines = story.get("story")
    for line in lines if isinstance(lines, list) else []:
        print(f"  {line}")
    return 0


def print_related(settings: Settings, source: str, k: int, *, as_json: bool) -> int:
    """`--related SOURCE`: what kb.search.related finds, as the MCP tool related_notes does."""
    with open_store(settings) as store:
        found = related(store, source, k)
    print(json.dumps(asdict(found), ensure_ascii=False) if as_json else format_related(found))
    return 0


def show(settings: Settings, target: str) -> int:
    """`--show SOURCE[:LINE]`: the note's numbered lines, as the MCP tool read_note gives them."""
    source, sep, line = target.rpartition(":")
    if not sep or not line.isdigit():
        source, line = target, "1"
    with open_store(settings) as store:
        stores = [store, store.beside(settings.CODE_COLLECTION)]
        passage = read_item(read_config(settings), stores, source, start_line=max(1, int(line)))
    print(passage.text)
    more = passage.end_line < passage.total_lines
    tail = f"; more: --show {source}:{passage.end_line + 1}" if more and passage.end_line else ""
    shown = f"lines {passage.start_line}-{passage.end_line} of {passage.total_lines}"
    n = passage.hidden_chars_removed
    hidden = f"; !{n} hidden characters removed" if n else ""
    print(f"({source}: {shown}{tail}{hidden})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
