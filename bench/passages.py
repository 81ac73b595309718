"""Which passage a search shows: for definition questions, is it the section that defines?

    uv run bench/passages.py [--cache DIR] [--json]

Issue 51: search ranks notes, and shows each note by its best chunk; a question asked of a
long page ("what is a workflow") can find the right page and show the wrong part of it. File-
level nDCG cannot see that. bench/datasets/manual/definitions.jsonl holds definition questions
about the manual's concept pages, each with the page and the section that answers it (judged by
reading the page, before any search ran). A question is answered when hybrid search (k=5, one
result per note) shows that page with a chunk of that section: the section's own chunk, or a
chunk that holds the section's heading (a short section shares its parent's chunk).
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
from kb.search.query import search

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
    rows, answered = [], 0
    try:
        with embedder() as url, indexed(collection, url, args.cache) as ix:
            for q in ix.queries:
                (page,) = q.relevant
                hits = search(ix.store, ix.client, q.text, K, per_note=1)
                found = [h for h in hits if str(h.source) == page]
                rank = hits.index(found[0]) + 1 if found else None
                shown = list(found[0].heading_path) if found else []
                ok = bool(found) and answers(shown, found[0].text, wanted[q.id])
                answered += ok
                rows.append(
                    [q.id, q.text, rank or "-", " > ".join(shown) or "-", "yes" if ok else "no"]
                )
    except STOPS as exc:
        print(f"error: {describe(exc)}", file=sys.stderr)
        return 1
    print(format_table(["id", "question", "page's rank", "passage shown", "defines"], rows))
    print(f"the defining passage shown for {answered} of {len(rows)} questions (k={K})")
    if args.json:
        print(json.dumps({"questions": len(rows), "answered": answered, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
