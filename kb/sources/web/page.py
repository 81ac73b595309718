"""A fetched web page as the index reads it: its text (an HTML page's article as Markdown, a PDF
through the PDF reader with each page a `## p. N` section, plain text as it is) and what it says
about itself, kept in STATE_DIR/web/pages/ (owner-only: it holds the pages' text) so a sync
reads it again without fetching; `page_note` makes the note ingest chunks, `saved_note` the
Markdown file save_url writes into the inbox.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import yaml

from kb.content import article
from kb.content.formats import pdf
from kb.content.formats.base import FormatError
from kb.content.notes import Note, iso_date, normalise_tags
from kb.core.schema import WEB, folder_keys
from kb.core.state import PRIVATE_FILE
from kb.sources.web.fetch import Fetched

PREFIX = "web"  # first component of every bookmarked page's `source`
# query parameters that only say where a link was clicked: two links differing in them are one page
TRACKING = re.compile(r"^(utm_\w+|fbclid|gclid|dclid|msclkid|mc_cid|mc_eid|ref_src|igshid)$", re.I)
_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class Page:
    url: str  # the address asked for (a bookmark's)
    final_url: str  # where it was found, after redirects
    content_type: str
    fetched_at: str  # UTC, ISO 8601: when this text was fetched (the payload's `fetched_at`)
    text: str  # Markdown (HTML), the PDF reader's text, or the plain text
    markdown: bool  # else plain text
    title: str | None = None
    site: str | None = None
    author: str | None = None
    published: str | None = None
    canonical: str | None = None
    description: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    checked_at: str | None = None  # when a refresh last found it (changed or not); None: fetched_at

    @property
    def link(self) -> str:
        """The link results cite (the note's `url`, its inbox folder, the dashboard's link): the
        address fetched, or the canonical URL the page names on that same host. A page cannot
        choose another site as its provenance: a canonical elsewhere stays in `canonical` only."""
        canonical = self.canonical or ""
        if canonical.startswith(("http://", "https://")) and host_of(canonical) == host_of(
            self.final_url
        ):
            return canonical
        return self.final_url

    def same_text(self, other: Page) -> bool:
        """Whether `other` reads as this page does (fetch times and validators aside)."""

        def read(page: Page) -> Page:
            return replace(page, fetched_at="", checked_at=None, etag=None, last_modified=None)

        return read(self) == read(other)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Page:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def host_of(url: str) -> str:
    host = (urlsplit(url).hostname or "").lower()
    return host.removeprefix("www.")


def url_key(url: str) -> str:
    """One page's identity, however it was saved: scheme, `www.`, default port, fragment,
    trailing slash and tracking parameters left out (`https://www.Example.com/a/?utm_source=x#b`
    and `http://example.com/a` are one page)."""
    parts = urlsplit(url.strip())
    port = parts.port if parts.port not in (None, 80, 443) else None
    host = host_of(url) + (f":{port}" if port else "")
    path = parts.path.rstrip("/") or "/"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                       if not TRACKING.match(k)])  # fmt: skip
    return urlunsplit(("", host, path, query, "")).removeprefix("//")


def page_source(url: str) -> str:
    """The `source` of a bookmarked page: `web/<site>/<words of its path>-<hash>` (readable, one
    per page: the hash is of its url_key)."""
    key = url_key(url)
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    path = urlsplit(url).path
    words = _SLUG.sub("-", path.lower()).strip("-")[-60:].strip("-") or "home"
    return f"{PREFIX}/{key.split('/', 1)[0]}/{words}-{digest}"


def read_page(fetched: Fetched, asked: str, fetched_at: str) -> Page:
    """The fetched page's text and metadata; FormatError when it holds no text."""
    common: dict[str, Any] = {
        "url": asked, "final_url": fetched.url, "content_type": fetched.content_type,
        "fetched_at": fetched_at, "etag": fetched.etag, "last_modified": fetched.last_modified,
    }  # fmt: skip
    if fetched.content_type == "application/pdf":  # each page a section: `Title > p. 3`
        pages = pdf.page_texts(fetched.body)
        if not any(p.strip() for p in pages):
            raise FormatError(f"no text in its {len(pages)} pages (a scanned PDF?)")
        text = "\n\n".join(f"## p. {n}\n\n{escaped(p.strip())}" for n, p in enumerate(pages, 1)
                           if p.strip())  # fmt: skip
        return Page(**common, text=text + "\n", markdown=True, site=host_of(fetched.url))
    if fetched.content_type == "text/plain":
        text = fetched.body.decode(fetched.charset or "utf-8", "replace").replace("\r\n", "\n")
        if not text.strip():
            raise FormatError("an empty page")
        return Page(**common, text=text, markdown=False, site=host_of(fetched.url))
    html = _decoded(fetched)
    found = article.extract(html, fetched.url)
    return Page(**common, text=found.text, markdown=True, title=found.title,
                site=found.site or host_of(fetched.url), author=found.author,
                published=_date(found.published), canonical=found.canonical,
                description=found.description)  # fmt: skip


def escaped(text: str) -> str:
    """Plain text inside Markdown: a line starting with `#` is no heading."""
    return re.sub(r"(?m)^(\s*)#", r"\1\\#", text)


def _decoded(fetched: Fetched) -> str | bytes:
    """The page's text by its declared charset; without one, its bytes (trafilatura reads a
    `<meta charset>` and guesses the rest)."""
    if fetched.charset:
        try:
            return fetched.body.decode(fetched.charset, "replace")
        except LookupError:
            pass  # a charset Python does not know
    return fetched.body


def _date(value: str | None) -> str | None:
    try:
        return iso_date(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class Marks:
    """What the bookmarks say about one page (merged across browsers)."""

    title: str = ""
    folders: tuple[tuple[str, ...], ...] = ()
    tags: tuple[str, ...] = ()


def body_of(page: Page) -> str:
    """The page's text, its article's own heading left out when it is the title (the note's
    `# title` stands above it)."""
    first, _, rest = page.text.partition("\n")
    title = " ".join((page.title or "").split())
    if (
        page.markdown
        and title
        and first.startswith("#")
        and " ".join(first.lstrip("#").split()) == title
    ):
        return rest.lstrip("\n")
    return page.text


def page_note(source: str, path: Path, page: Page, marks: Marks) -> Note:
    """The page as a note: `# title` (the bookmark's, else the page's), then its text; its
    description is each chunk's topic line, the page and bookmark fields its payload."""
    title = marks.title or page.title or page.link
    head = f"# {' '.join(title.split())}\n\n"
    text = head + body_of(page)
    shown = ["/".join(f) for f in marks.folders]
    record: dict[str, Any] = {
        "kind": WEB,
        "url": page.link,
        "site": page.site,
        "author": page.author,
        "fetched_at": page.fetched_at,
        "bookmark_folders": shown,
        "folder_keys": folder_keys([list(f) for f in marks.folders]),
    }
    tags = tuple(normalise_tags(list(marks.tags)))
    return Note(path, source, text, 0, tags, page.description, page.published, record=record,
                markdown=page.markdown)  # fmt: skip


def saved_note(page: Page, tags: list[str], comment: str | None) -> str:
    """The Markdown file save_url writes into the inbox: frontmatter with the page's fields
    (kb.content.notes reads `kind: web` notes' url, site, author, fetched_at), `# title`, the
    user's note about it, then the page's text."""
    meta: dict[str, Any] = {"kind": WEB, "url": page.link, "site": page.site,
                            "author": page.author, "document_date": page.published,
                            "fetched_at": page.fetched_at, "tags": tags,
                            "topic": page.description}  # fmt: skip
    front = yaml.safe_dump({k: v for k, v in meta.items() if v}, allow_unicode=True,
                           sort_keys=False)  # fmt: skip
    title = " ".join((page.title or page.link).split())
    body = body_of(page) if page.markdown else escaped(page.text)
    said = f"> {' '.join(comment.split())}\n\n" if comment and comment.strip() else ""
    return f"---\n{front}---\n# {title}\n\n{said}{body.strip()}\n"


class Pages:
    """The pages fetched, one JSON file per page (by its url_key), rewritten atomically."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, url: str) -> Path:
        return self.folder / (hashlib.sha256(url_key(url).encode()).hexdigest()[:32] + ".json")

    def get(self, url: str) -> Page | None:
        try:
            return Page.from_dict(json.loads(self.path(url).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None  # never fetched, or written by another version: fetched again

    def put(self, page: Page) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.path(page.url)
        part = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(asdict(page), out, ensure_ascii=False)
        os.replace(part, path)
