"""Which extractor keeps a web page's article and drops the rest: trafilatura (what
kb.content.article uses) against readability-lxml (the Python port of Arc90's Readability, with
markdownify for Markdown), on the recorded real-shaped pages of tests/web_data (a WordPress blog,
a news story, a Sphinx docs page, a Medium essay, a recipe; each with its navigation, cookie
banner, ads, newsletter box, comments, related links and footer).

tests/web_data/pages.json lists, per page, sentences of the article and snippets of its
boilerplate. Per extractor and page: the share of article sentences its text keeps, the share of
boilerplate snippets left in it, whether it found the page's title, and its time per page, side
by side in one run (Markdown markup is ignored when matching).

    uv run --group dev bench/web_extract.py [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import REPO_ROOT, cpu_name

PAGES = REPO_ROOT / "tests" / "web_data"
Extractor = Callable[[str], tuple[str, str | None]]  # html -> (Markdown text, title)


def trafilatura_text(html: str) -> tuple[str, str | None]:
    from kb.content.article import extract

    found = extract(html, "https://example.org/page")
    return found.text, found.title


def readability_text(html: str) -> tuple[str, str | None]:
    from markdownify import markdownify
    from readability import Document

    document = Document(html)
    text = markdownify(document.summary(html_partial=True), heading_style="ATX")
    return text, document.short_title()


EXTRACTORS: dict[str, Extractor] = {
    "trafilatura": trafilatura_text,
    "readability-lxml": readability_text,
}


def words(text: str) -> str:
    """Text as compared, whole words: links' labels kept, Markdown marks, punctuation and case
    ignored."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w]+", " ", text)
    return " ".join(text.split()).lower()


def measure(repeat: int) -> dict[str, Any]:
    expected = json.loads((PAGES / "pages.json").read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = []
    for name, truth in expected.items():
        html = (PAGES / "pages" / name).read_text(encoding="utf-8")
        for extractor, run in EXTRACTORS.items():
            run(html)  # warm: imports and first-call caches are not the page's time
            started = time.perf_counter()
            for _ in range(repeat):
                text, title = run(html)
            seconds = (time.perf_counter() - started) / repeat
            found = f" {words(text)} "
            kept = sum(f" {words(s)} " in found for s in truth["article"])
            left = sum(f" {words(s)} " in found for s in truth["boilerplate"])
            rows.append({
                "page": name, "extractor": extractor, "kept": kept,
                "article": len(truth["article"]), "left": left,
                "boilerplate": len(truth["boilerplate"]),
                "title": (title or "").strip() == truth["title"], "ms": seconds * 1000,
            })  # fmt: skip
    totals = {}
    for extractor in EXTRACTORS:
        mine = [r for r in rows if r["extractor"] == extractor]
        totals[extractor] = {
            "kept": sum(r["kept"] for r in mine) / sum(r["article"] for r in mine),
            "left": sum(r["left"] for r in mine) / sum(r["boilerplate"] for r in mine),
            "titles": sum(r["title"] for r in mine),
            "ms": sum(r["ms"] for r in mine) / len(mine),
        }
    return {"cpu": cpu_name(), "pages": len(expected), "rows": rows, "totals": totals}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per page, for the time")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    result = measure(max(1, args.repeat))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"CPU: {result['cpu']}; {result['pages']} recorded pages, {args.repeat} runs each")
    print(f"{'page':30} {'extractor':17} {'article kept':>13} {'boilerplate left':>17} "
          f"{'title':>6} {'ms/page':>8}")  # fmt: skip
    for r in result["rows"]:
        print(f"{r['page']:30} {r['extractor']:17} {r['kept']:>6}/{r['article']:<6} "
              f"{r['left']:>8}/{r['boilerplate']:<8} {'yes' if r['title'] else 'no':>6} "
              f"{r['ms']:>8.1f}")  # fmt: skip
    print()
    for extractor, t in result["totals"].items():
        print(f"{extractor:17} article kept {t['kept']:6.1%}  boilerplate left {t['left']:6.1%}  "
              f"titles {t['titles']}/{result['pages']}  {t['ms']:.1f} ms/page")  # fmt: skip
    a, b = (result["totals"][name] for name in EXTRACTORS)
    print(f"time ratio readability-lxml / trafilatura: {b['ms'] / a['ms']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
