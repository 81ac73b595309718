"""A web page's article: its main text as Markdown (headings kept, so chunks carry the heading
path) without the navigation, ads, cookie banners, comments and footers around it, and what the
page says about itself (title, site, author, published date, canonical URL, description).

trafilatura does both: bench/web_extract.py measured it against readability-lxml on the recorded
pages of tests/web_data (share of the article kept, share of the boilerplate left) and it kept
more of the article with less boilerplate (bench/results/web-extraction.md).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import trafilatura
from trafilatura.settings import Document
from trafilatura.utils import detect_encoding

from kb.content.formats.base import FormatError

log = logging.getLogger(__name__)
# trafilatura and its date finder log each page they give up on at WARNING/ERROR: our failure
# names the page once, with the reason
for _name in ("trafilatura", "htmldate", "courlan"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)

DESCRIPTION_CHARS = 300  # the description is each chunk's topic line: a sentence, not a page
_BLANKS = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class Article:
    text: str  # Markdown: `#` headings, paragraphs, lists, code
    title: str | None
    site: str | None
    author: str | None
    published: str | None  # ISO date (YYYY-MM-DD)
    canonical: str | None  # the page's canonical URL, when it names one
    description: str | None


# the date the page says it was first published, from its markup, never guessed from its text
DATES = {"extensive_search": False, "original_date": True}


def decoded(html: bytes) -> str:
    """A page served without a charset: UTF-8, else the encoding its bytes suggest."""
    for encoding in ("utf-8", *detect_encoding(html)):
        try:
            return html.decode(encoding)
        except (LookupError, UnicodeDecodeError):
            continue
    return html.decode("utf-8", "replace")


def extract(html: str | bytes, url: str) -> Article:
    """The article of `html` (a page fetched from `url`); FormatError when the page holds no
    main text (an empty shell filled in by JavaScript, a login wall)."""
    if isinstance(html, bytes):
        html = decoded(html)
    text = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_formatting=True,  # headings and emphasis: the heading path of each chunk
        include_links=False,  # links' targets are noise to embed; their words stay
        include_images=False,
        include_comments=False,  # readers' comments are not the article
        include_tables=True,
        # not its cache of paragraphs seen before in this process: a page read twice (a refresh,
        # a saved page also bookmarked) would lose them the second time
        deduplicate=False,
        with_metadata=False,
    )
    if not text or not text.strip():
        raise FormatError("no article text in the page (a page built by JavaScript?)")
    meta: Document | None = trafilatura.extract_metadata(html, default_url=url, date_config=DATES)

    def field(name: str) -> str | None:
        value = getattr(meta, name, None) if meta is not None else None
        return " ".join(value.split()) if isinstance(value, str) and value.strip() else None

    description = field("description")
    if description and len(description) > DESCRIPTION_CHARS:
        description = description[:DESCRIPTION_CHARS].rsplit(" ", 1)[0] + " …"
    return Article(
        text=_BLANKS.sub("\n\n", text).strip() + "\n",
        title=field("title"),
        site=field("sitename"),
        author=field("author"),
        published=field("date"),
        canonical=field("url"),
        description=description,
    )
