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
from typing import TYPE_CHECKING, Any

from kb.app.backend import embed_client, open_store, read_config, searcher
from kb.app.cli import fail, script
from kb.content.chunking import PATH_SEPARATOR
from kb.core.errors import StoreUnavailable
from kb.core.settings import Settings, get_settings
from kb.search import TOOL_MAX_K, SearchRequest, search
from kb.search.domains import DOMAINS
from kb.search.filters import FILTERS, FilterError, FilterField, Filters
from kb.search.query import MAX_K, MODES, Hit
from kb.search.read import read_item
from kb.search.related import MAX_K as MAX_RELATED
from kb.search.related import Related, related
from kb.search.rerank import Reranked

if TYPE_CHECKING:
    from kb.app import remote

PREVIEW_CHARS = 200
OPTION = {f.name: f.option for f in FILTERS}  # a filter's name -> the option errors name
GROUPS = {
    "notes": "filters",
    "videos": "saved videos' filters (YOUTUBE_PLAYLISTS)",
    "web": "web pages' filters (BOOKMARKS)",
}
METAVARS = {"tags": "TAGS", "date": "DATE", "duration": "LENGTH", "text": None, "kind": None}


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


def clock(seconds: int) -> str:
    """612 -> "10:12", 3723 -> "1:02:03"."""
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def format_hit(rank: int, hit: Hit) -> str:
    where = hit.source or "(unknown source)"
    if hit.kind == "video":  # a saved video: its link, length and channel
        length = clock(hit.duration_s) if hit.duration_s is not None else "?"
        where += f"  {hit.url}  ({length}, {hit.channel or 'unknown channel'})"
    elif hit.line_start is not None:
        where += f":{hit.line_start}-{hit.line_end}"
    section = f"  ({PATH_SEPARATOR.join(hit.heading_path)})" if hit.heading_path else ""
    shown = ("", PATH_SEPARATOR.join(hit.heading_path))  # a heading path is printed below
    if hit.locator not in shown and not hit.locator.startswith("L "):  # lines: printed above
        where += f"  {hit.locator}"  # p. 3, row 17, cell 4 [code], Methods, ¶ 4
    tags = f"  [{', '.join(hit.tags)}]" if hit.tags else ""
    text = " ".join(hit.text.split())
    preview = text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
    n = hit.hidden_chars_removed
    hidden = f"  !{n} hidden characters removed" if n else ""
    sure = f"  (confidence {hit.confidence:.2f})" if hit.confidence is not None else ""
    stale = "  !stale: the file changed since it was indexed" if hit.stale else ""
    line = f"{rank}. {hit.score:.3f}  {where}{tags}{section}{sure}{hidden}{stale}\n   {preview}"
    return line + (f"\n   {explained(hit)}" if hit.explain is not None else "")


def explained(hit: Hit) -> str:
    """--explain's line: the result's place in each ranking, the filters and its indexing."""
    why = hit.explain
    assert why is not None

    def place(name: str, rank: int | None, score: float | None) -> str:
        return f"{name} #{rank} {score:.3f}" if rank is not None and score is not None else (
            f"{name} not in top"
        )  # fmt: skip

    parts = [
        place("semantic", why.semantic_rank, why.semantic_score),
        place("keyword", why.keyword_rank, why.keyword_score),
        f"first stage #{why.fused_rank} {why.first_score:.3f}",
    ]
    if why.rerank_rank is not None and why.rerank_score is not None:
        parts.append(f"rerank #{why.rerank_rank} {why.rerank_score:.3f} (weight "
                     f"{why.rerank_weight:g}, blend {why.blended:.5f})")  # fmt: skip
    if why.found_by:
        parts.append("found by " + ", ".join(why.found_by))
    if why.filters:
        parts.append("filters " + ", ".join(f"{k}={v}" for k, v in why.filters.items()))
    parts.append(f"{why.collection}, indexed {why.indexed_at or '?'}")
    return "why: " + " · ".join(parts)


def _listed(values: list[str]) -> list[str]:
    return [item for value in values for item in value.split(",")]


def add_filters(parser: argparse.ArgumentParser) -> None:
    """One option per filter of kb.search.filters, in its group."""
    groups = {name: parser.add_argument_group(title) for name, title in GROUPS.items()}
    for spec in FILTERS:
        add = groups[spec.group].add_argument
        if spec.value == "tags":
            add(*spec.options, dest=spec.name, action="append", default=[], metavar="TAGS",
                help=f"{spec.help} Comma-separated; may repeat.")  # fmt: skip
        elif spec.value == "kind":
            add(*spec.options, dest=spec.name, choices=("note", "video"), help=spec.help)
        else:
            add(*spec.options, dest=spec.name, metavar=METAVARS[spec.value], help=spec.help)


def filters_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Filters:
    """The options' Filters; a bad value exits 2 naming the option as it is spelled."""

    def value(spec: FilterField) -> Any:  # each filter's own type (kb.search.filters.Filters)
        given = getattr(args, spec.name)
        return _listed(given) if spec.value == "tags" else given

    try:
        return Filters(**{spec.name: value(spec) for spec in FILTERS})
    except FilterError as exc:
        parser.error(exc.spelled(OPTION.__getitem__))


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, SearchRequest | None]:
    parser = argparse.ArgumentParser(description="Search your ingested notes.")
    parser.add_argument("query", nargs="?", default="", help="what to look for, in your own words")
    parser.add_argument(
        "-k",
        type=int,
        default=5,
        help=f"number of results, 1-{MAX_K} (5); with --related the nearest unlinked notes",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="hybrid",
        help="hybrid: meaning and keywords together (default); semantic: meaning only; "
        "keyword: exact words, names and identifiers only",
    )
    parser.add_argument(
        "--per-note",
        type=int,
        default=1,
        metavar="N",
        help="at most N chunks per note (1: every result a different note; 0: no limit)",
    )
    parser.add_argument(
        "--no-rerank",
        action="store_true",
        help="first-stage order only (skip the embedder's reranker: faster)",
    )
    parser.add_argument(
        "--answer",
        action="store_true",
        help="write a short answer citing [source:lines] from the best passages, with the "
        "model at LLM_URL",
    )
    parser.add_argument(
        "--domain",
        choices=DOMAINS,
        default="all",
        help="all: notes and code together (default); prose: no code; code: code and notebooks",
    )
    parser.add_argument(
        "--show",
        metavar="SOURCE[:LINE]",
        help="print an indexed note's lines from LINE (default 1) instead of searching",
    )
    parser.add_argument(
        "--related",
        metavar="SOURCE",
        help="list the notes linking to SOURCE, those it links to and the nearest unlinked ones "
        "(-k of them) instead of searching",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="say how each result was found: its rank and score in a semantic and a keyword "
        "search, the first stage's and the reranker's place, the filters, when it was indexed",
    )
    parser.add_argument(
        "--max-chars",
        type=int,
        metavar="N",
        help="instead of -k: the best passages that fit in N characters, a note's adjacent "
        "chunks merged into one passage",
    )
    parser.add_argument(
        "--why",
        metavar="NOTE",
        help="say why NOTE is not found (indexed, deleted, waiting, failed, skipped by a gate, "
        "never seen); with a query, its rank in each mode and the filters that leave it out",
    )
    parser.add_argument("--json", action="store_true", help='print {"results": [...]} as JSON')
    add_filters(parser)
    args = parser.parse_args(argv)
    if args.show is not None or args.related is not None:
        if args.query:
            parser.error(f"--{'show' if args.show else 'related'} reads a note: give no query")
        if args.show is not None and args.related is not None:
            parser.error("--show and --related: give one of them")
        if args.related is not None and not 0 <= args.k <= MAX_RELATED:
            parser.error(f"-k must be between 0 and {MAX_RELATED} with --related")
        return args, None
    if args.why is not None:
        args.filters = filters_of(parser, args)
        return args, None
    if not args.query.strip():
        parser.error("the query is empty")
    if not 1 <= args.k <= MAX_K:
        parser.error(f"-k must be between 1 and {MAX_K}")
    if args.per_note < 0:
        parser.error("--per-note must be 0 or more")
    try:
        request = SearchRequest(
            args.query,
            args.k,
            mode=args.mode,
            filters=filters_of(parser, args),
            per_note=args.per_note or None,
            domain=args.domain,
            rerank=False if args.no_rerank else None,
            explain=args.explain,
            max_chars=args.max_chars,
        )
    except ValueError as exc:
        parser.error(str(exc).replace("max_chars", "--max-chars"))
    return args, request


def through_server(settings: Settings, request: SearchRequest) -> Reranked:
    """The same search by the MCP server that holds the embedded storage folder."""
    if request.k > TOOL_MAX_K:
        print(f"note: through the MCP server at most {TOOL_MAX_K} results", file=sys.stderr)
    from kb.app import remote  # the MCP SDK: loaded only when the server is asked

    return remote.search_notes(settings.mcp_url, settings.MCP_TOKEN, request)


def print_answer(settings: Settings, args: argparse.Namespace, hits: list[Hit]) -> int:
    """The cited answer LLM_URL writes from `hits` (citations only ever name these hits)."""
    from kb.search import (
        answer as kb_answer,  # only --answer needs it: a plain search starts faster
    )

    raw = "Nothing in the notes matches this question."
    if hits:
        raw = kb_answer.chat(
            settings.LLM_URL,
            args.query,
            hits,
            model=settings.LLM_MODEL,
            api_key=settings.LLM_API_KEY,
            timeout=settings.LLM_TIMEOUT,
        )
    cited = kb_answer.cite(raw, hits)
    labels = [kb_answer.label(h) for h in cited.cited]
    if args.json:
        body = {"answer": cited.text, "citations": labels, "dropped_citations": cited.dropped}
        print(json.dumps(body, ensure_ascii=False))
        return 0
    print(cited.text)
    if labels:
        print("\nsources: " + ", ".join(labels))
    if cited.dropped:
        print("dropped citations (not among the retrieved passages): " + ", ".join(cited.dropped))
    return 0


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

    hits = found.hits
    if args.answer:
        return print_answer(settings, args, hits)
    if args.json:
        body = {"results": [hit.to_dict() for hit in hits], "no_good_match": found.no_good_match}
        print(json.dumps(body, ensure_ascii=False))
        return 0
    if not hits:
        print("no results")
    else:
        print("\n".join(format_hit(rank, hit) for rank, hit in enumerate(hits, 1)))
    if hits and found.no_good_match:
        print("no good match: none of these looks relevant; your notes may not cover this")
    return 0


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


WHY = {"backlink": "links here", "link": "linked from it", "both": "linked both ways"}


def format_related(found: Related) -> str:
    """The related notes, each with why: `links here`, `linked from it`, `similar 0.71`."""
    aliases = f"  (also: {', '.join(found.aliases)})" if found.aliases else ""
    lines = [
        f"{found.source}: {found.title or ''}{aliases}",
        f"  {found.links_in} notes link here, it links to {found.links_out}",
    ]
    for note in found.notes:
        why = WHY.get(note.why) or f"similar {note.score:.3f}"
        lines.append(f"  {why:17} {note.source}  {note.title or ''}".rstrip())
    lines += [f"  unresolved: [[{target}]]" for target in found.unresolved]
    if found.hidden_chars_removed:
        lines.append(f"  !{found.hidden_chars_removed} hidden characters removed")
    return "\n".join(lines)


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
