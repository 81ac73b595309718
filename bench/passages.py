"""Which passage a search shows: for definition questions, is it the section that defines?

    uv run bench/passages.py [--cache DIR] [--json]

Issue 51: search ranks notes, and shows each note by its best chunk; a question asked of a
long page ("what is a workflow") can find the right page and show the wrong part of it. File-
level nDCG cannot see that. bench/datasets/manual/definitions.jsonl holds definition questions
about the manual's concept pages, each with the page and the section that answers it (judged by
reading the page, before any search ran). Each question is searched twice in one run: the
first stage alone (each note shown by its best chunk, as before kb.search.lead) and search as
search_notes runs it (hybrid, k=5, one result per note, no reranker: none is served here). A
question is answered when the search shows its page with a chunk of that section: the section's
own chunk, or a chunk that holds the section's heading (a short section shares its parent's).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import STOPS, describe, embedder, format_table
from bench.corpora import DATASETS, Collection
from bench.fusion_sweep import indexed
from kb.search.entry import Searcher, SearchRequest, search
from kb.search.query import search as first_stage

MANUAL = DATASETS / "manual"
DEFINITIONS = MANUAL / "definitions.jsonl"
K = 5


def sections(path: Path = DEFINITIONS) -> dict[str, str]:
    """Each question's id -> the heading of the section that answers it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return {q["id"]: q["section"] for q in map(json.loads, filter(str.strip, lines))}


def answers(heading_path: list[str], text: str, section: str) -> bool:
    return bool(heading_path) and (heading_path[-1] == section or f"# {section}\n" in text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache", type=Path, metavar="DIR", help="embedding cache kept between runs"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    wanted = sections()
    collection = Collection("manual", MANUAL / "docs", DEFINITIONS, "prose", "definitions")
    rows: list[list[object]] = []
    answered = {"best chunk": 0, "search": 0}
    try:
        with embedder() as url, indexed(collection, url, args.cache) as ix:
            for q in ix.queries:
                (page,) = q.relevant
                asked = SearchRequest(q.text, k=K, rerank=False)  # what search_notes runs
                shown = {
                    "best chunk": first_stage(ix.store, ix.client, q.text, K, per_note=1),
                    "search": search(Searcher(ix.store, ix.client), asked).hits,
                }
                row: list[object] = [q.id, q.text]
                for name, hits in shown.items():
                    found = [h for h in hits if str(h.source) == page]
                    path = list(found[0].heading_path) if found else []
                    ok = bool(found) and answers(path, found[0].text, wanted[q.id])
                    answered[name] += ok
                    row += [" > ".join(path) or "-", "yes" if ok else "no"]
                rows.append(row)
    except STOPS as exc:
        print(f"error: {describe(exc)}", file=sys.stderr)
        return 1
    headers = ["id", "question", "best chunk shown", "defines", "search shows", "defines"]
    print(format_table(headers, rows))
    for name, count in answered.items():
        print(f"{name}: the defining passage for {count} of {len(rows)} questions (k={K})")
    if args.json:
        print(json.dumps({"questions": len(rows), "answered": answered, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
