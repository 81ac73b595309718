"""Bookmark files in each browser's real format, written here (Chromium's Bookmarks JSON, a
Firefox places.sqlite in Firefox's schema, the Netscape HTML export), read by
kb.sources.web.bookmarks: folders, titles, tags, what is not a web page, a locked Firefox."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from web_fixtures import Mark, chromium_bookmarks, firefox_places, netscape_bookmarks

from kb.sources.web import bookmarks
from kb.sources.web.bookmarks import Bookmark, BookmarksError

MARKS = [
    Mark("https://blog.example.org/raft", "Raft, explained", ("Read later",), ("distributed",)),
    Mark("https://docs.example.io/pool/", "Pools", ("Read later", "Work")),
    Mark("https://news.example.net/bikes", "Bike lanes", ()),
    Mark("javascript:void(document.body.style.zoom=2)", "Zoom bookmarklet", ()),
]


def test_chromium_bookmarks_json_gives_each_bookmark_its_folder_path(tmp_path: Path) -> None:
    path = chromium_bookmarks(tmp_path / "Bookmarks", MARKS)
    found = bookmarks.read(path)
    assert found.bookmarks == [
        Bookmark(
            "https://blog.example.org/raft", "Raft, explained", ("Bookmarks bar", "Read later")
        ),
        Bookmark("https://docs.example.io/pool/", "Pools", ("Bookmarks bar", "Read later", "Work")),
        Bookmark("https://news.example.net/bikes", "Bike lanes", ("Bookmarks bar",)),
    ]
    assert found.not_web == 1
    assert bookmarks.read(path.parent).bookmarks == found.bookmarks  # the profile folder


def test_firefox_places_gives_folders_and_tags_and_is_read_while_firefox_holds_it(
    tmp_path: Path,
) -> None:
    path = firefox_places(
        tmp_path / "places.sqlite",
        [*MARKS, Mark("https://menu.example.com/", "In the menu", ("Menu", "Old"))],
        wal=True,
    )
    locker = sqlite3.connect(path)  # as Firefox runs: an exclusive lock held on the file
    locker.execute("PRAGMA locking_mode=EXCLUSIVE")
    locker.execute("BEGIN EXCLUSIVE")
    locker.execute("INSERT INTO moz_places (url, guid) VALUES ('https://late.example/', 'late')")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        sqlite3.connect(path, timeout=0).execute("SELECT count(*) FROM moz_bookmarks").fetchall()
    try:
        found = bookmarks.read(path)
    finally:
        locker.rollback()
        locker.close()
    assert sorted(found.bookmarks, key=lambda b: b.url) == [
        Bookmark(
            "https://blog.example.org/raft",
            "Raft, explained",
            ("Bookmarks Toolbar", "Read later"),
            ("distributed",),
        ),
        Bookmark(
            "https://docs.example.io/pool/", "Pools", ("Bookmarks Toolbar", "Read later", "Work")
        ),
        Bookmark("https://menu.example.com/", "In the menu", ("Bookmarks Menu", "Old")),
        Bookmark("https://news.example.net/bikes", "Bike lanes", ("Bookmarks Toolbar",)),
    ]
    assert found.not_web == 1  # the bookmarklet; the tag rows are tags, not bookmarks
    # read from a private copy, removed again: nothing new beside the browser's files
    assert {p.name for p in tmp_path.iterdir()} <= {
        "places.sqlite",
        "places.sqlite-wal",
        "places.sqlite-shm",
    }


def test_the_netscape_html_export_gives_folders_tags_and_unescaped_titles(tmp_path: Path) -> None:
    marks = [
        Mark(
            "https://example.com/a?x=1&y=2",
            "Fish & chips <3",
            ("Bookmarks Toolbar", "Food"),
            ("uk", "recipes"),
        ),
        Mark("https://example.com/top", "Top", ()),
        *MARKS[3:],
    ]
    found = bookmarks.read(netscape_bookmarks(tmp_path / "bookmarks.html", marks))
    assert found.bookmarks == [
        Bookmark(
            "https://example.com/a?x=1&y=2",
            "Fish & chips <3",
            ("Bookmarks Toolbar", "Food"),
            ("uk", "recipes"),
        ),
        Bookmark("https://example.com/top", "Top", ()),
    ]
    assert found.not_web == 1


def test_a_file_that_is_no_bookmarks_file_is_named_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("just a note\n")
    with pytest.raises(BookmarksError, match="not a bookmarks file"):
        bookmarks.read(tmp_path / "notes.txt")
    with pytest.raises(BookmarksError, match="cannot be read"):
        bookmarks.read(tmp_path / "missing.json")
    (tmp_path / "Bookmarks").write_text('{"version": 1}')
    with pytest.raises(BookmarksError, match="not a Chromium Bookmarks file"):
        bookmarks.read(tmp_path / "Bookmarks")
    (tmp_path / "places.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    with pytest.raises(BookmarksError, match=r"places\.sqlite"):
        bookmarks.read(tmp_path / "places.sqlite")
    (tmp_path / "profile").mkdir()
    with pytest.raises(BookmarksError, match=r"a folder without Bookmarks or places\.sqlite"):
        bookmarks.read(tmp_path / "profile")
