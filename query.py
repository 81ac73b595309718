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

While the MCP server holds embedded storage (`make local`), every option goes through it
(kb.app.notes: its tools, found from STATE_DIR/server.json) and prints the same output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from kb.app.cli import fail, script
from kb.app.notes import Notes, open_notes
from kb.app.query_options import parse_args
from kb.app.query_print import format_hit, format_related, print_answer, print_results
from kb.core.settings import get_settings

__all__ = ["format_hit", "main", "parse_args"]  # what tests/ call on the script


@script
def main(argv: Sequence[str] | None = None) -> int:
    args, request = parse_args(argv)
    settings = get_settings()
    if args.answer and not settings.LLM_URL:
        from kb.search.answer import NO_MODEL

        return fail(f"--answer: {NO_MODEL}", 2)
    notes = open_notes(settings)  # in this process, or through the server holding storage
    try:
        if request is None and args.why is not None:
            return why(notes, args)
        if request is None and args.related is not None:
            found = notes.related(args.related, args.k)
            print(json.dumps(asdict(found), ensure_ascii=False) if args.json
                  else format_related(found))  # fmt: skip
            return 0
        if request is None:
            return show(notes, args.show)
        hits = notes.search(request)
    finally:
        notes.close()
    if args.answer:
        return print_answer(settings, args, hits.hits)
    return print_results(hits, as_json=args.json)


def why(notes: Notes, args: argparse.Namespace) -> int:
    """`--why NOTE [QUERY]`: the note's story (kb.app.why), as the MCP tool why_not_found."""
    try:
        story = notes.why(args.why, args.query.strip() or None, args.filters,
                          args.per_note or None)  # fmt: skip
    except ValueError as exc:
        return fail(f"--why: {exc}", 2)
    if args.json:
        print(json.dumps(story, ensure_ascii=False))
        return 0
    print(f"{story['source']}: {story['state']}")
    lines = story.get("story")
    for line in lines if isinstance(lines, list) else []:
        print(f"  {line}")
    return 0


def show(notes: Notes, target: str) -> int:
    """`--show SOURCE[:LINE]`: the note's numbered lines, as the MCP tool read_note gives them."""
    source, sep, line = target.rpartition(":")
    if not sep or not line.isdigit():
        source, line = target, "1"
    passage = notes.read(source, max(1, int(line)))
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
