"""A web site on 127.0.0.1 for the web tests: real HTTP, replaying recorded real-shaped pages
(tests/web_data/pages: a blog, a news story, a docs page, an essay, a recipe, each with its
navigation, ads, cookie banner, comments and footer), a PDF, a plain-text file, a redirect chain,
a redirect loop, a 404, a slow answer, a huge page, an image, and a robots.txt. A test may change
a page (`site.pages[path] = ...`) and reads what was asked (`site.requests`).

Also a pytest plugin (tests/conftest.py): `web_site` (one per test) and `decoy` (a second server
on 127.0.0.2 that only counts requests: a refused redirect must never reach it).

Bookmark files in each browser's real format are written by `chromium_bookmarks`,
`firefox_places` (Firefox's own schema for moz_places and moz_bookmarks, with its root folders)
and `netscape_bookmarks`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "web_data"
PAGES = {f"/pages/{p.name}": p.read_bytes() for p in sorted((DATA / "pages").glob("*.html"))}
EXPECTED = json.loads((DATA / "pages.json").read_text(encoding="utf-8"))
PDF_PAGES = [
    "Raft replicates a log across servers. A leader accepts entries and sends them to followers.",
    "An entry is committed once a majority of servers stored it; committed entries are applied.",
]
PLAIN = "Packing list for the ferry\n\nPassports, chargers, the blue rain jackets.\n"
ROBOTS = "User-agent: *\nDisallow: /private/\n"
HUGE_BYTES = 3_000_000
HOPS = 3


@dataclass
class Site:
    pages: dict[str, bytes] = field(default_factory=lambda: dict(PAGES))
    requests: list[str] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)  # lets /slow answer
    url: str = ""
    redirect_to: str = ""  # where /away redirects (a test sets it)

    def page(self, name: str) -> str:
        return f"{self.url}/pages/{name}"


class _Handler(BaseHTTPRequestHandler):
    site: Site
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(
        self,
        status: int,
        body: bytes,
        kind: str = "text/html; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, to: str) -> None:
        self.send_response(302)
        self.send_header("Location", to)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        site = self.site
        path = self.path.split("?", 1)[0]
        site.requests.append(path)
        if path in site.pages:
            body = site.pages[path]
            etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
            if self.headers.get("If-None-Match") == etag:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._send(200, body, headers={"ETag": etag})
        elif path == "/robots.txt":
            self._send(200, ROBOTS.encode(), "text/plain")
        elif path == "/private/page.html":
            self._send(200, PAGES["/pages/sourdough-blog.html"])
        elif path == "/paper.pdf":
            from format_files import pdf_bytes  # fpdf takes seconds to import: only when asked

            self._send(200, pdf_bytes(PDF_PAGES), "application/pdf")
        elif path == "/notes.txt":
            self._send(200, PLAIN.encode(), "text/plain; charset=utf-8")
        elif path.startswith("/hop/"):
            hop = int(path.rsplit("/", 1)[1])
            to = "/pages/connection-pool-docs.html" if hop >= HOPS else f"/hop/{hop + 1}"
            self._redirect(to)
        elif path == "/loop":
            self._redirect("/loop")
        elif path == "/away":
            self._redirect(site.redirect_to)
        elif path == "/slow":
            site.release.wait(30)
            self._send(200, b"<html><body><p>too late</p></body></html>")
        elif path == "/huge":
            self.send_response(200)  # no Content-Length: only the streamed size can tell
            self.send_header("Content-Type", "text/html")
            self.send_header("Connection", "close")
            self.end_headers()
            chunk = b"<p>" + b"x" * 65_536 + b"</p>\n"
            for _ in range(HUGE_BYTES // len(chunk) + 1):
                try:
                    self.wfile.write(chunk)
                except OSError:
                    return  # the client gave up, as it should
            self.close_connection = True
        elif path == "/image.png":
            self._send(200, b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png")
        else:
            self._send(404, b"<html><body><h1>Not found</h1></body></html>")


@contextmanager
def serving(host: str = "127.0.0.1") -> Iterator[Site]:
    site = Site()
    handler = type("Handler", (_Handler,), {"site": site})
    server = ThreadingHTTPServer((host, 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    site.url = f"http://{host}:{server.server_address[1]}"
    try:
        yield site
    finally:
        site.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def web_site() -> Iterator[Site]:
    with serving() as site:
        yield site


@pytest.fixture
def decoy() -> Iterator[Site]:
    """A server on 127.0.0.2 (loopback too): a refused connection must never reach it."""
    with serving("127.0.0.2") as site:
        yield site


# --- bookmark files, in each browser's real format -----------------------------------------


@dataclass(frozen=True)
class Mark:
    url: str
    title: str
    folders: tuple[str, ...]  # below the root folder ("Read later",)
    tags: tuple[str, ...] = ()


def chromium_bookmarks(path: Path, marks: Sequence[Mark]) -> Path:
    """Chromium's `Bookmarks` JSON (as Chrome, Edge and Brave write it): roots bookmark_bar,
    other and synced; a mark's first folder "Other" files it under "Other bookmarks"."""

    def folder(name: str, guid: str) -> dict:
        return {
            "children": [],
            "date_added": "13350000000000000",
            "date_last_used": "0",
            "date_modified": "13350000000000000",
            "guid": guid,
            "id": guid[:4],
            "name": name,
            "type": "folder",
        }

    roots = {
        "bookmark_bar": folder("Bookmarks bar", "0bc5d13f-2cba-5d74-951f-3f233fe6c908"),
        "other": folder("Other bookmarks", "82b081ec-3dd3-529c-8475-ab6c344590dd"),
        "synced": folder("Mobile bookmarks", "4cf2e351-0e85-532b-bb37-df045d8f8d0f"),
    }
    ids = iter(range(100, 10_000))
    for mark in marks:
        node = roots["other"] if mark.folders[:1] == ("Other",) else roots["bookmark_bar"]
        for name in mark.folders[1:] if mark.folders[:1] == ("Other",) else mark.folders:
            found = [c for c in node["children"] if c["type"] == "folder" and c["name"] == name]
            if not found:
                found = [folder(name, f"f{next(ids):04d}-0000-4000-8000-000000000000")]
                node["children"].append(found[0])
            node = found[0]
        number = next(ids)
        node["children"].append(
            {
                "date_added": "13350000000000000",
                "date_last_used": "0",
                "guid": f"{number:08d}-0000-4000-8000-000000000000",
                "id": str(number),
                "meta_info": {"power_bookmark_meta": ""},
                "name": mark.title,
                "type": "url",
                "url": mark.url,
            }
        )
    data = {"checksum": "0" * 32, "roots": roots, "version": 1}
    path.write_text(json.dumps(data, indent=3), encoding="utf-8")
    return path


# Firefox's tables as toolkit/components/places/nsPlacesTables.h declares them
FIREFOX_SCHEMA = """
CREATE TABLE moz_origins ( id INTEGER PRIMARY KEY, prefix TEXT NOT NULL, host TEXT NOT NULL,
  frecency INTEGER NOT NULL, recalc_frecency INTEGER NOT NULL DEFAULT 0,
  alt_frecency INTEGER, recalc_alt_frecency INTEGER NOT NULL DEFAULT 0, UNIQUE (prefix, host) );
CREATE TABLE moz_places (   id INTEGER PRIMARY KEY, url LONGVARCHAR, title LONGVARCHAR,
  rev_host LONGVARCHAR, visit_count INTEGER DEFAULT 0, hidden INTEGER DEFAULT 0 NOT NULL,
  typed INTEGER DEFAULT 0 NOT NULL, frecency INTEGER DEFAULT -1 NOT NULL,
  last_visit_date INTEGER , guid TEXT, foreign_count INTEGER DEFAULT 0 NOT NULL,
  url_hash INTEGER DEFAULT 0 NOT NULL , description TEXT, preview_image_url TEXT,
  site_name TEXT, origin_id INTEGER REFERENCES moz_origins(id), recalc_frecency INTEGER NOT NULL
  DEFAULT 0, alt_frecency INTEGER, recalc_alt_frecency INTEGER NOT NULL DEFAULT 0);
CREATE TABLE moz_bookmarks (  id INTEGER PRIMARY KEY, type INTEGER, fk INTEGER DEFAULT NULL,
  parent INTEGER, position INTEGER, title LONGVARCHAR, keyword_id INTEGER, folder_type TEXT,
  dateAdded INTEGER, lastModified INTEGER, guid TEXT, syncStatus INTEGER NOT NULL DEFAULT 0,
  syncChangeCounter INTEGER NOT NULL DEFAULT 1);
CREATE INDEX moz_places_url_hashindex ON moz_places (url_hash);
CREATE UNIQUE INDEX moz_places_guid_uniqueindex ON moz_places (guid);
CREATE INDEX moz_bookmarks_itemindex ON moz_bookmarks (fk, type);
CREATE INDEX moz_bookmarks_parentindex ON moz_bookmarks (parent, position);
CREATE UNIQUE INDEX moz_bookmarks_guid_uniqueindex ON moz_bookmarks (guid);
"""
# id, guid and title of Firefox's root folders (the tags root holds one folder per tag)
FIREFOX_ROOTS = [
    (1, "root________", "", 0),
    (2, "menu________", "menu", 1),
    (3, "toolbar_____", "toolbar", 1),
    (4, "tags________", "tags", 1),
    (5, "unfiled_____", "unfiled", 1),
    (6, "mobile______", "mobile", 1),
]
FIREFOX_BOOKMARK, FIREFOX_FOLDER = 1, 2


def firefox_places(path: Path, marks: Sequence[Mark], *, wal: bool = False) -> Path:
    """A Firefox profile's places.sqlite: marks filed under the toolbar (first folder "Menu":
    the bookmarks menu), tags as Firefox files them (a folder per tag under the tags root, one
    more bookmark row per tagged URL). `wal`: journal mode WAL, as Firefox runs it."""
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
    db.executescript(FIREFOX_SCHEMA)
    stamp = 1_700_000_000_000_000
    for row_id, guid, title, parent in FIREFOX_ROOTS:
        db.execute(
            "INSERT INTO moz_bookmarks (id, type, parent, position, title, guid, "
            "dateAdded, lastModified) VALUES (?, 2, ?, ?, ?, ?, ?, ?)",
            (row_id, parent, row_id, title, guid, stamp, stamp),
        )
    folders: dict[tuple[int, str], int] = {}

    def folder(parent: int, name: str) -> int:
        if (parent, name) not in folders:
            cursor = db.execute(
                "INSERT INTO moz_bookmarks (type, parent, position, title, guid, "
                "dateAdded, lastModified) VALUES (2, ?, 0, ?, ?, ?, ?)",
                (parent, name, f"fold{len(folders):08d}", stamp, stamp),
            )
            folders[parent, name] = int(cursor.lastrowid or 0)
        return folders[parent, name]

    places: dict[str, int] = {}
    for position, mark in enumerate(marks):
        if mark.url not in places:
            cursor = db.execute(
                "INSERT INTO moz_places (url, title, rev_host, guid, url_hash, "
                "frecency) VALUES (?, ?, ?, ?, ?, 100)",
                (mark.url, mark.title, "moc.elpmaxe.", f"plc{len(places):09d}", len(mark.url)),
            )
            places[mark.url] = int(cursor.lastrowid or 0)
        top = 2 if mark.folders[:1] == ("Menu",) else 3
        parent = top
        for name in mark.folders[1:] if top == 2 else mark.folders:
            parent = folder(parent, name)
        db.execute(
            "INSERT INTO moz_bookmarks (type, fk, parent, position, title, guid, "
            "dateAdded, lastModified) VALUES (1, ?, ?, ?, ?, ?, ?, ?)",
            (places[mark.url], parent, position, mark.title, f"bmk{position:09d}", stamp, stamp),
        )
        for tag in mark.tags:
            db.execute(
                "INSERT INTO moz_bookmarks (type, fk, parent, position, title, guid, "
                "dateAdded, lastModified) VALUES (1, ?, ?, 0, NULL, ?, ?, ?)",
                (places[mark.url], folder(4, tag), f"tag{position:05d}{tag[:4]}", stamp, stamp),
            )
    db.commit()
    db.close()
    return path


def netscape_bookmarks(path: Path, marks: Sequence[Mark]) -> Path:
    """The bookmarks HTML every browser exports (Netscape's format, Firefox's flavour)."""
    tree: dict = {}
    for mark in marks:
        node = tree
        for name in mark.folders:
            node = node.setdefault(("folder", name), {})
        node[("mark", len(node), mark.url)] = mark

    def lines(node: dict, depth: int) -> list[str]:
        pad = "    " * depth
        out = [f"{pad}<DL><p>"]
        for key, value in node.items():
            if key[0] == "folder":
                toolbar = ' PERSONAL_TOOLBAR_FOLDER="true"' if key[1] == "Bookmarks Toolbar" else ""
                out.append(
                    f'{pad}    <DT><H3 ADD_DATE="1700000000" LAST_MODIFIED="1700000000"'
                    f"{toolbar}>{escape(key[1])}</H3>"
                )
                out += lines(value, depth + 1)
            else:
                tags = f' TAGS="{escape(",".join(value.tags))}"' if value.tags else ""
                out.append(
                    f'{pad}    <DT><A HREF="{escape(value.url)}" ADD_DATE="1700000000"'
                    f' LAST_MODIFIED="1700000000"{tags}>{escape(value.title)}</A>'
                )
        out.append(f"{pad}</DL><p>")
        return out

    head = [
        "<!DOCTYPE NETSCAPE-Bookmark-file-1>",
        "<!-- This is an automatically generated file.",
        "     It will be read and overwritten.",
        "     DO NOT EDIT! -->",
        '<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=UTF-8">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'self\'; '
        "script-src 'none'; img-src data: *; object-src 'none'\"></meta>",
        "<TITLE>Bookmarks</TITLE>",
        "<H1>Bookmarks Menu</H1>",
        "",
    ]
    path.write_text("\n".join(head + lines(tree, 0)) + "\n", encoding="utf-8")
    return path
