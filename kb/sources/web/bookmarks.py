"""A browser's bookmarks, read from the file the browser keeps them in (BOOKMARKS):

- Chromium, Chrome, Edge, Brave, Vivaldi: the profile's `Bookmarks` JSON (`roots` -> folders of
  `{"type": "url" | "folder", "name", "url", "children"}`);
- Firefox: the profile's `places.sqlite` (`moz_bookmarks` rows, type 1 a bookmark, 2 a folder,
  pointing at `moz_places` for the URL). Firefox holds it locked while it runs, so a private
  copy (with its `-wal` journal, where the latest changes wait) is read and then deleted.
  Bookmarks filed under Firefox's tags root are its tags, not bookmarks;
- the Netscape HTML export every browser writes (`<DT><H3>` folders, `<DT><A HREF TAGS>`).

The format is told by the content, not the name; a profile folder holding one of these files
stands for it. What a file holds is a list of `Bookmark`s (folder path and title as the browser
shows them); anything that is not an http(s) address (a bookmarklet, a `place:` query) is left
out and counted.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from kb.core.limits import TooComplex, json_loads

SQLITE_HEADER = b"SQLite format 3\x00"
NETSCAPE = b"<!doctype netscape-bookmark-file-1>"
PROFILE_FILES = ("Bookmarks", "places.sqlite")  # what a profile folder stands for
# Firefox's root folders (moz_bookmarks.guid) as its bookmark manager names them
FIREFOX_ROOTS = {
    "menu________": "Bookmarks Menu",
    "toolbar_____": "Bookmarks Toolbar",
    "unfiled_____": "Other Bookmarks",
    "mobile______": "Mobile Bookmarks",
}
FIREFOX_TAGS = "tags________"
CHROMIUM_ROOTS = {"bookmark_bar": "Bookmarks bar", "other": "Other bookmarks",
                  "synced": "Mobile bookmarks"}  # fmt: skip


class BookmarksError(Exception):
    """A bookmarks file that cannot be read; str() says why."""


@dataclass(frozen=True)
class Bookmark:
    url: str
    title: str
    folders: tuple[str, ...]  # outermost first: ("Bookmarks bar", "Read later")
    tags: tuple[str, ...] = ()


@dataclass
class Read:
    bookmarks: list[Bookmark]
    not_web: int  # entries that are no http(s) address (bookmarklets, place: queries)


def read(path: Path) -> Read:
    """The bookmarks in `path` (a bookmarks file, or a profile folder holding one);
    BookmarksError naming what is wrong."""
    if path.is_dir():
        found = [path / name for name in PROFILE_FILES if (path / name).is_file()]
        if not found:
            raise BookmarksError(f"a folder without {' or '.join(PROFILE_FILES)}")
        path = found[0]
    try:
        with path.open("rb") as file:
            head = file.read(4096)
    except OSError as exc:
        raise BookmarksError(f"cannot be read ({exc.strerror or exc})") from None
    if head.startswith(SQLITE_HEADER):
        entries = list(_firefox(path))
    elif head.lstrip().startswith(b"{"):
        entries = list(_chromium(path))
    elif NETSCAPE in head.lower():
        entries = list(_netscape(path))
    else:
        raise BookmarksError(
            "not a bookmarks file (Chromium's Bookmarks JSON, Firefox's places.sqlite or an "
            "exported bookmarks HTML)"
        )
    web = [b for b in entries if b.url.lower().startswith(("http://", "https://"))]
    return Read(web, len(entries) - len(web))


# --- Chromium ---------------------------------------------------------------------------------


def _chromium(path: Path) -> Iterator[Bookmark]:
    try:
        data = json_loads(path.read_text(encoding="utf-8"))
        roots = data["roots"]
    except TooComplex as exc:
        raise BookmarksError(f"not read: {exc}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BookmarksError(f"not a Chromium Bookmarks file ({exc})") from None
    if not isinstance(roots, dict):
        raise BookmarksError("not a Chromium Bookmarks file (no roots)")
    for key, root in roots.items():
        if isinstance(root, dict):
            name = str(root.get("name") or CHROMIUM_ROOTS.get(key, key))
            yield from _chromium_folder(root, (name,))


def _chromium_folder(folder: dict[str, Any], path: tuple[str, ...]) -> Iterator[Bookmark]:
    for child in folder.get("children") or []:
        if not isinstance(child, dict):
            continue
        name = str(child.get("name") or "")
        if child.get("type") == "folder":
            yield from _chromium_folder(child, (*path, name))
        elif child.get("type") == "url" and isinstance(child.get("url"), str):
            yield Bookmark(child["url"], name, path)


# --- Firefox ----------------------------------------------------------------------------------


def _firefox(path: Path) -> Iterator[Bookmark]:
    """places.sqlite, read from a private copy (Firefox keeps the file locked)."""
    with tempfile.TemporaryDirectory(prefix="places-") as folder:  # 0700: it holds history too
        copy = Path(folder) / "places.sqlite"
        try:
            shutil.copyfile(path, copy)
            for suffix in ("-wal",):  # the journal's changes are not in the file yet
                journal = path.with_name(path.name + suffix)
                if journal.is_file():
                    shutil.copyfile(journal, copy.with_name(copy.name + suffix))
        except OSError as exc:
            raise BookmarksError(f"cannot be copied ({exc.strerror or exc})") from None
        try:
            db = sqlite3.connect(copy)
            try:
                rows = db.execute(
                    "SELECT b.id, b.type, b.parent, b.title, b.guid, p.url, b.position "
                    "FROM moz_bookmarks b LEFT JOIN moz_places p ON p.id = b.fk "
                    "ORDER BY b.parent, b.position, b.id"
                ).fetchall()
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise BookmarksError(f"not a readable Firefox places.sqlite ({exc})") from None
    folders: dict[int, tuple[int, str, str]] = {}  # id -> (parent, title, guid)
    marks: list[tuple[int, str, str]] = []  # (parent, title, url)
    for row_id, kind, parent, title, guid, url, _ in rows:
        if kind == 2:
            folders[row_id] = (parent, title or "", guid or "")
        elif kind == 1 and url:
            marks.append((parent, title or "", url))

    def path_of(folder: int) -> tuple[tuple[str, ...], bool]:
        """The folder's names from its root down, and whether it is under the tags root."""
        names: list[str] = []
        seen: set[int] = set()
        while folder in folders and folder not in seen:
            seen.add(folder)
            parent, title, guid = folders[folder]
            if guid == FIREFOX_TAGS:
                return (), True
            if parent not in folders or folders[parent][2] == "root________":
                names.append(FIREFOX_ROOTS.get(guid, title))
                break
            names.append(title)
            folder = parent
        return tuple(reversed(names)), False

    tags: dict[str, list[str]] = {}
    kept: list[tuple[str, str, tuple[str, ...]]] = []
    for parent, title, url in marks:
        where, tagged = path_of(parent)
        if tagged:  # a tag folder's entry: the tag of that URL
            tags.setdefault(url, []).append(folders[parent][1])
        else:
            kept.append((url, title, where))
    for url, title, where in kept:
        yield Bookmark(url, title, where, tuple(tags.get(url, ())))


# --- the Netscape HTML export -----------------------------------------------------------------


class _Netscape(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str | None] = []  # one per open <DL>: its folder's name
        self.pending: str | None = None  # the last <H3>'s name, for the <DL> after it
        self.text: list[str] | None = None  # the words of the <H3> or <A> being read
        self.link: dict[str, str] = {}
        self.found: list[Bookmark] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "dl":
            self.stack.append(self.pending)
            self.pending = None
        elif tag in ("h3", "a"):
            self.text = []
            self.link = {k: v or "" for k, v in attrs} if tag == "a" else {}

    def handle_endtag(self, tag: str) -> None:
        if tag == "dl" and self.stack:
            self.stack.pop()
        elif tag == "h3" and self.text is not None:
            self.pending = " ".join("".join(self.text).split())
            self.text = None
        elif tag == "a" and self.text is not None:
            folders = tuple(name for name in self.stack if name)
            tags = tuple(t.strip() for t in self.link.get("tags", "").split(",") if t.strip())
            title = " ".join("".join(self.text).split())
            self.found.append(Bookmark(self.link.get("href", ""), title, folders, tags))
            self.text = None

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)


def _netscape(path: Path) -> Iterator[Bookmark]:
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise BookmarksError(f"cannot be read ({exc.strerror or exc})") from None
    parser = _Netscape()
    parser.feed(text)
    parser.close()
    yield from parser.found
