"""Bookmarked web pages synced as a source (kb.sources.web) through the real ingest: the MiniLM
embedder, embedded Qdrant, and the recorded pages served from 127.0.0.1. Each browser's bookmark
file syncs convergently (add, change, remove, restore) with no orphan point; the same page in two
browsers is one item; a changed page is embedded again only where it changed; a failing page is
named and tried again without holding the rest back."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import make_settings, run_script, script_env
from web_fixtures import (
    EXPECTED,
    Mark,
    Site,
    chromium_bookmarks,
    firefox_places,
    netscape_bookmarks,
)

from kb.app.backend import embed_client, open_store
from kb.app.backend import searcher as make_searcher
from kb.app.ingest import ingest_config, run
from kb.content.chunking import chunk_note
from kb.core.errors import IngestError
from kb.core.schema import BOOKMARK_REMOVED, point_id
from kb.core.settings import Settings
from kb.core.state import State
from kb.embedding.client import EmbedClient
from kb.ingest import lifecycle
from kb.ingest.progress import Summary
from kb.ingest.run import ingest
from kb.search import SearchRequest, search
from kb.search.filters import Filters
from kb.search.read import read_item
from kb.sources.web.page import page_source
from kb.sources.web.source import NOT_WEB, OUTSIDE, web_sources
from kb.store.points import Store
from notes_server.dashboard import templates

Writer = Callable[[Path, list[Mark]], Path]
FORMATS: dict[str, tuple[str, Writer, str]] = {
    "chromium": ("Bookmarks", chromium_bookmarks, "Bookmarks bar"),
    "firefox": ("places.sqlite", firefox_places, "Bookmarks Toolbar"),
    "netscape": ("bookmarks.html", netscape_bookmarks, "Bookmarks Toolbar"),
}


def web_settings(tmp_path: Path, *files: Path, **values) -> Settings:
    """Settings that sync the bookmarks `files`, the embedder in this process."""
    return make_settings(
        tmp_path,
        IN_PROCESS_EMBED_URL,
        BOOKMARKS=",".join(map(str, files)),
        WEB_ALLOW_PRIVATE=True,
        **values,
    )


def sync(settings: Settings, transport: httpx.BaseTransport) -> Summary:
    with open_store(settings) as store, embed_client(settings, transport=transport) as client:
        return run(settings, client, store)


def web_points(settings: Settings, store: Store | None = None) -> dict[str, list[dict]]:
    """{source: its points' payloads, in chunk order} of the web origin."""
    found: dict[str, list[dict]] = {}
    with open_store(settings) if store is None else nullcontext(store) as opened:
        for _, payload in opened.payloads():
            if payload.get("origin") == "web":
                found.setdefault(payload["source"], []).append(payload)
    return {s: sorted(p, key=lambda x: x["chunk_index"]) for s, p in found.items()}


def check_no_orphans(settings: Settings, live: set[str], deleted: set[str] = frozenset()) -> None:
    """The web origin holds exactly the `live` pages (visible) and the `deleted` ones (hidden),
    each with exactly its current chunks: no stale chunk, no point of a page not listed."""
    points = web_points(settings)
    assert set(points) == live | deleted, "orphan or missing pages"
    source = web_sources(settings, State(settings.STATE_DIR))[0]
    listing = source.listing(everything=True)
    by_name = {item.source: item for item in listing.items}
    for name, payloads in points.items():
        hidden = {bool(p.get("deleted_at")) for p in payloads}
        assert hidden == {name in deleted}, name
        if name in live:
            chunks = chunk_note(source.read(by_name[name], max_bytes=10**7))
            assert [p["chunk_index"] for p in payloads] == list(range(len(chunks))), name
    with open_store(settings) as store:
        ids = [pid for pid, p in store.payloads() if p.get("origin") == "web"]
    assert sorted(ids) == sorted(
        point_id(n, p["chunk_index"]) for n, ps in points.items() for p in ps
    )


@pytest.mark.parametrize("browser", sorted(FORMATS))
def test_a_browsers_bookmarks_sync_convergently_add_change_remove_restore(
    tmp_path: Path, embedder_transport: httpx.BaseTransport, web_site: Site, browser: str
) -> None:
    name, write, root = FORMATS[browser]
    top = (root,) if browser == "netscape" else ()
    blog, news, docs = (
        web_site.page(p)
        for p in ("sourdough-blog.html", "bike-lanes-news.html", "connection-pool-docs.html")
    )
    marks = [
        Mark(blog, "Starter routine", ("Read later",), ("baking",)),
        Mark(news, "Bike lanes vote", ("News",)),
        Mark(docs, "", ("Read later", "Work")),
    ]
    marks = [Mark(m.url, m.title, top + m.folders, m.tags) for m in marks]
    path = write(tmp_path / name, marks)
    settings = web_settings(tmp_path, path)

    added = sync(settings, embedder_transport)  # add
    names = {page_source(u): u for u in (blog, news, docs)}
    assert sorted(added.added) == sorted(names) and not added.failed
    points = web_points(settings)
    first = points[page_source(blog)][0]
    expected = EXPECTED["sourdough-blog.html"]
    assert (first["kind"], first["origin"], first["title"]) == ("web", "web", "Starter routine")
    assert (first["url"], first["site"], first["author"], first["document_date"]) == (
        blog,  # the address fetched: its canonical URL is on another host
        expected["site"],
        expected["author"],
        expected["published"],
    )
    assert first["bookmark_folders"] == [f"{root}/Read later"] and first["fetched_at"]
    assert first["topic"].startswith("How I feed, store and revive a sourdough starter")
    heading_paths = {tuple(p["heading_path"]) for p in points[page_source(blog)]}
    assert ("Starter routine", "The fridge is a pause button") in heading_paths
    if browser != "chromium":  # Chromium keeps no tags
        assert first["tags"] == ["baking"]
    assert points[page_source(docs)][0]["title"] == "Connection pooling"  # no bookmark title
    check_no_orphans(settings, set(names))

    fetched = len(web_site.requests)
    again = sync(settings, embedder_transport)  # nothing changed: nothing fetched, nothing written
    assert sorted(again.unchanged) == sorted(names) and not again.added and not again.replaced
    assert len(web_site.requests) == fetched

    marks[0] = Mark(blog, "Starter routine", (*top, "Baking"), ("baking",))  # moved: change
    write(path, marks)
    moved = sync(settings, embedder_transport)
    assert moved.replaced == [page_source(blog)] and moved.embedded_cached == moved.written
    assert web_points(settings)[page_source(blog)][0]["bookmark_folders"] == [f"{root}/Baking"]

    write(path, marks[1:])  # remove
    removed = sync(settings, embedder_transport)
    assert removed.deleted == [page_source(blog)]
    with open_store(settings) as store:
        [gone] = lifecycle.list_deleted(store, cause=BOOKMARK_REMOVED)
    assert (gone.source, gone.origin) == (page_source(blog), "web")
    check_no_orphans(settings, {page_source(news), page_source(docs)}, {page_source(blog)})

    write(path, marks)  # restore: as it was, nothing embedded
    back = sync(settings, embedder_transport)
    assert back.restored == [page_source(blog)] and not back.added and not back.replaced
    check_no_orphans(settings, set(names))


def test_the_same_page_in_three_browsers_is_one_item_with_every_folder_and_tag(
    tmp_path: Path, embedder_transport: httpx.BaseTransport, web_site: Site
) -> None:
    essay = web_site.page("plain-text-notes-essay.html")
    spelled = essay.replace("127.0.0.1", "127.0.0.1") + "?utm_source=newsletter#responses"
    files = [
        chromium_bookmarks(tmp_path / "Bookmarks", [Mark(essay, "Plain text essay", ("Tools",))]),
        firefox_places(
            tmp_path / "places.sqlite", [Mark(spelled, "", ("Read later",), ("notes",))]
        ),
        netscape_bookmarks(
            tmp_path / "bookmarks.html", [Mark(essay + "/", "Essay", ("Imported",))]
        ),
    ]
    settings = web_settings(tmp_path, *files)
    summary = sync(settings, embedder_transport)
    assert summary.added == [page_source(essay)] and not summary.failed
    [payloads] = web_points(settings).values()
    assert payloads[0]["title"] == "Plain text essay"  # the first file's title
    assert payloads[0]["bookmark_folders"] == [
        "Bookmarks bar/Tools",
        "Bookmarks Toolbar/Read later",
        "Imported",
    ]
    assert payloads[0]["tags"] == ["notes"]
    assert web_site.requests.count("/pages/plain-text-notes-essay.html") == 1


def test_the_folder_filter_and_bookmarks_folders_keep_only_read_later(
    tmp_path: Path, embedder_transport: httpx.BaseTransport, web_site: Site
) -> None:
    marks = [
        Mark(web_site.page("shakshuka-recipe.html"), "Shakshuka", ("Read Later", "Food")),
        Mark(web_site.page("bike-lanes-news.html"), "Bikes", ("News",)),
        Mark("javascript:alert(1)", "A bookmarklet", ()),
    ]
    path = chromium_bookmarks(tmp_path / "Bookmarks", marks)
    settings = web_settings(tmp_path, path)
    assert len(sync(settings, embedder_transport).added) == 2
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        searcher = make_searcher(settings, store, client, client)
        query = "eggs poached in tomato sauce"
        every = search(searcher, SearchRequest(query, k=10, per_note=1))
        later = search(
            searcher, SearchRequest(query, k=10, filters=Filters(folder=" read later/ "))
        )
        food = search(
            searcher, SearchRequest(query, k=10, filters=Filters(folder="Read later/food"))
        )
        none = search(
            searcher, SearchRequest(query, k=10, filters=Filters(folder="food/read later"))
        )
        webs = search(searcher, SearchRequest(query, k=10, filters=Filters(kind="web")))
    recipe = page_source(marks[0].url)
    assert {h.source for h in every.hits} == {recipe, page_source(marks[1].url)}
    assert [h.source for h in later.hits] == [recipe] == [h.source for h in food.hits]
    assert none.hits == [] and {h.kind for h in webs.hits} == {"web"}
    hit = later.hits[0]
    assert (hit.url, hit.site, hit.author) == (
        marks[0].url,
        "Olive & Ember Kitchen",
        "Samir Haddad",
    )
    assert hit.bookmark_folders == ["Bookmarks bar/Read Later/Food"] and hit.fetched_at

    (tmp_path / "only").mkdir()
    only = web_settings(tmp_path / "only", path, BOOKMARKS_FOLDERS="READ LATER")
    summary = sync(only, embedder_transport)
    assert summary.added == [recipe]
    assert summary.skipped == {OUTSIDE: 1, NOT_WEB: 1}


def test_a_changed_page_is_embedded_again_only_where_it_changed(
    tmp_path: Path,
    embedder_transport: httpx.BaseTransport,
    web_site: Site,
    client: EmbedClient,
    store: Store,
) -> None:
    settings = web_settings(
        tmp_path,
        chromium_bookmarks(
            tmp_path / "Bookmarks", [Mark(web_site.page("connection-pool-docs.html"), "Pools", ())]
        ),
        WEB_REFRESH_DAYS=7,
    )
    clock = Clock(datetime(2026, 12, 1, tzinfo=UTC))
    first = web_ingest(settings, client, store, clock)
    assert len(first.added) == 1 and first.written >= 3
    path = "/pages/connection-pool-docs.html"

    clock.now += timedelta(days=3)  # not due yet: not asked
    asked = web_site.requests.count(path)
    assert (
        web_ingest(settings, client, store, clock).unchanged
        and web_site.requests.count(path) == asked
    )

    clock.now += timedelta(days=5)  # due, unchanged: 304, nothing downloaded or written
    same = web_ingest(settings, client, store, clock)
    assert same.unchanged and web_site.requests.count(path) == asked + 1

    page = web_site.pages[path]
    web_site.pages[path] = page.replace(
        b"rarely needs more than eight connections per process",
        b"rarely needs more than twelve connections per process",
    )
    clock.now += timedelta(days=8)
    changed = web_ingest(settings, client, store, clock)
    assert len(changed.replaced) == 1
    assert changed.written - changed.embedded_cached == 1  # one section changed: one chunk embedded
    texts = " ".join(p["text"] for p in next(iter(web_points(settings, store).values())))
    assert "twelve connections" in texts and "eight connections per process" not in texts


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def web_ingest(settings: Settings, client: EmbedClient, store: Store, clock: Clock) -> Summary:
    state = State(settings.STATE_DIR)
    [source] = web_sources(settings, state, clock=clock)
    return ingest(source, client, store, state, ingest_config(settings))


def test_failing_pages_are_named_and_tried_again_next_sync_without_holding_back_the_rest(
    tmp_path: Path, embedder_transport: httpx.BaseTransport, web_site: Site
) -> None:
    good = web_site.page("bike-lanes-news.html")
    bad = {
        f"{web_site.url}/missing": "HTTP 404 Not Found",
        f"{web_site.url}/slow": "no answer within WEB_TIMEOUT=1s",
        f"{web_site.url}/huge": "more than WEB_MAX_BYTES=500,000 bytes",
        f"{web_site.url}/image.png": "content type image/png is not one of WEB_CONTENT_TYPES",
        f"{web_site.url}/private/page.html": f"{web_site.url}/robots.txt disallows it "
        "(WEB_ROBOTS=false fetches it anyway)",
    }
    marks = [Mark(url, url.rsplit("/", 1)[1], ()) for url in [*bad, good]]
    settings = web_settings(
        tmp_path,
        netscape_bookmarks(tmp_path / "b.html", marks),
        WEB_TIMEOUT=1,
        WEB_MAX_BYTES=500_000,
    )
    first = sync(settings, embedder_transport)
    assert first.added == [page_source(good)]
    assert {f.source: f.reason for f in first.failed} == bad

    web_site.pages["/missing"] = web_site.pages["/pages/sourdough-blog.html"]  # it is back
    second = sync(settings, embedder_transport)
    assert second.added == [page_source(f"{web_site.url}/missing")]
    assert second.unchanged == [page_source(good)]
    assert len(second.failed) == len(bad) - 1 and web_site.requests.count("/slow") == 2


def test_loopback_bookmarks_are_refused_by_default_and_nothing_is_asked(
    tmp_path: Path, embedder_transport: httpx.BaseTransport, web_site: Site
) -> None:
    path = chromium_bookmarks(
        tmp_path / "Bookmarks", [Mark(web_site.page("shakshuka-recipe.html"), "S", ())]
    )
    # WEB_ALLOW_PRIVATE unset
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL, BOOKMARKS=str(path))
    summary = sync(settings, embedder_transport)
    [failure] = summary.failed
    assert "not a public address" in failure.reason and "WEB_ALLOW_PRIVATE=true" in failure.reason
    assert not summary.added and web_site.requests == []


def test_an_unreadable_bookmarks_file_fails_by_name_and_deletes_nothing(
    tmp_path: Path, embedder_transport: httpx.BaseTransport, web_site: Site
) -> None:
    marks = [
        Mark(web_site.page(p), p, ())
        for p in ("bike-lanes-news.html", "sourdough-blog.html", "shakshuka-recipe.html")
    ]
    path = chromium_bookmarks(tmp_path / "Bookmarks", marks)
    settings = web_settings(tmp_path, path)
    assert len(sync(settings, embedder_transport).added) == 3
    path.write_text("{ half written")
    broken = sync(settings, embedder_transport)
    assert [(f.source, f.reason.split(" (")[0]) for f in broken.failed] == [
        (str(path), "BOOKMARKS: not a Chromium Bookmarks file")
    ]
    assert not broken.deleted and len(web_points(settings)) == 3

    chromium_bookmarks(path, marks[:1])  # two of three gone at once: the guard stops first
    with pytest.raises(IngestError, match="BOOKMARKS: 2 of its 3 pages are no longer bookmarked"):
        sync(settings, embedder_transport)
    with open_store(settings) as store:
        assert lifecycle.list_deleted(store) == []


def test_a_bookmarked_page_reads_as_its_stored_text_and_shows_its_site_on_the_dashboard(
    tmp_path: Path, embedder_transport: httpx.BaseTransport, web_site: Site
) -> None:
    url = web_site.page("sourdough-blog.html")
    settings = web_settings(
        tmp_path,
        chromium_bookmarks(tmp_path / "Bookmarks", [Mark(url, "", ("Bread",))]),
    )
    assert sync(settings, embedder_transport).added == [page_source(url)]
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        passage = read_item(settings, [store], page_source(url))
        hits = search(
            make_searcher(settings, store, client, client),
            SearchRequest("sourdough starter in the fridge", k=1),
        ).hits
    expected = EXPECTED["sourdough-blog.html"]
    assert passage.text.startswith(f"1\t{expected['title']}\n2\t{url}")
    assert "Cold does not kill the culture" in passage.text
    page = templates.get_template("_results.html").render(
        hits=hits, params={"q": "sourdough", "mode": "hybrid", "domain": "all"}
    )
    assert f'<span class="site">{expected["site"]}</span>' in page
    assert f'href="{url}"' in page and "Bookmarks bar/Bread" in page


def test_ingest_py_save_url_keeps_a_page_as_a_note_and_refuses_loopback_by_default(
    tmp_path: Path, embedder_url: str, web_site: Site
) -> None:
    settings = make_settings(tmp_path, embedder_url)
    url = web_site.page("bike-lanes-news.html")
    refused = run_script("ingest.py", "--save-url", url, env=script_env(settings), cwd=tmp_path)
    assert refused.returncode == 1 and "not a public address" in refused.stderr
    assert not any(settings.NOTES_DIR.rglob("*.md")) and web_site.requests == []
    done = run_script(
        "ingest.py",
        "--save-url",
        url,
        cwd=tmp_path,
        env=script_env(settings, WEB_ALLOW_PRIVATE="true"),
    )
    assert done.returncode == 0, done.stderr
    title = EXPECTED["bike-lanes-news.html"]["title"]
    assert done.stdout.startswith("saved ingested/web/127.0.0.1/council-approves")
    assert f": {title} (" in done.stdout and "passages)" in done.stdout
