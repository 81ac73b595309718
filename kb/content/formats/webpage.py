"""HTML -> Markdown (headings kept) with beautifulsoup4 + markdownify; scripts and styles are
removed first, so only what a reader sees is indexed."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup
from markdownify import markdownify

from kb.content.formats.base import FormatError, Parsed, decode_text

_HIDDEN = ("script", "style", "noscript", "template", "head")


def read(data: bytes) -> Parsed:
    soup = BeautifulSoup(decode_text(data), "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(_HIDDEN):
        tag.decompose()
    text = re.sub(r"\n{3,}", "\n\n", markdownify(str(soup), heading_style="ATX")).strip()
    if title and not text.startswith("# "):
        text = f"# {title}\n\n{text}"
    if not text.strip():
        raise FormatError("no visible text in the page")
    return Parsed(text + "\n", "prose", markdown=True)
