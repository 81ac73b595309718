"""HTML -> Markdown (headings kept) with beautifulsoup4 + markdownify; scripts and styles are
removed first, so only what a reader sees is indexed. The page's date is the first of its
`<meta>` dates (`created`, `date`, `dcterms.created`, `article:published_time`, then the
`modified` ones) that is an ISO date: exporters of Apple Notes and other apps write them."""

from __future__ import annotations

import re
from datetime import date, datetime

from bs4 import BeautifulSoup
from markdownify import markdownify

from kb.content.formats.base import FormatError, Parsed, decode_text

_HIDDEN = ("script", "style", "noscript", "template", "head")
_DATES = ("created", "date", "dcterms.created", "dc.date", "article:published_time",
          "modified", "dcterms.modified", "article:modified_time", "last-modified")  # fmt: skip


def read(data: bytes) -> Parsed:
    soup = BeautifulSoup(decode_text(data), "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    written = page_date(soup)
    for tag in soup(_HIDDEN):
        tag.decompose()
    text = re.sub(r"\n{3,}", "\n\n", markdownify(str(soup), heading_style="ATX")).strip()
    if title and not text.startswith("# "):
        text = f"# {title}\n\n{text}"
    if not text.strip():
        raise FormatError("no visible text in the page")
    return Parsed(text + "\n", "prose", markdown=True, date=written)


def page_date(soup: BeautifulSoup) -> str | None:
    """The first `<meta>` date of _DATES (by name or property) that reads as ISO 8601."""
    found: dict[str, str] = {}
    for meta in soup.find_all("meta"):
        key = str(meta.get("name") or meta.get("property") or "").strip().lower()
        if key in _DATES and key not in found:
            found[key] = str(meta.get("content") or "").strip()
    for key in (k for k in _DATES if k in found):
        for kind in (date, datetime):  # a bare date stays one (as a note's document_date)
            try:
                return kind.fromisoformat(found[key]).isoformat()
            except ValueError:
                continue
    return None
