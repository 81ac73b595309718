"""Fetching web pages (kb.sources.web.fetch, kb.sources.web.page) from a loopback site replaying
recorded pages: the guard that keeps fetches off the user's own machine and network (by default,
redirects and DNS answers included), the WEB_* limits, robots.txt, conditional refreshes, and
what is read from HTML, PDF and plain text."""

from __future__ import annotations

import ipaddress

import httpcore
import pytest
from web_fixtures import EXPECTED, HOPS, PDF_PAGES, PLAIN, Site

from kb.sources.web.fetch import (
    NOT_MODIFIED,
    Fetched,
    Fetcher,
    FetchError,
    Guard,
    Limits,
    Refused,
    everywhere,
    is_public,
)
from kb.sources.web.page import page_source, read_page, url_key

OPEN = Limits(allow_private=True)  # what the tests' settings say: WEB_ALLOW_PRIVATE=true
STAMP = "2026-12-01T10:00:00+00:00"


def fetched(site: Site, path: str, limits: Limits = OPEN) -> Fetched:
    with Fetcher(limits) as fetcher:
        got = fetcher.fetch(site.url + path)
    assert isinstance(got, Fetched)
    return got


def refused(url: str, limits: Limits = OPEN, **options) -> str:
    with Fetcher(limits, **options) as fetcher, pytest.raises(FetchError) as caught:
        fetcher.fetch(url)
    return str(caught.value)


def test_a_loopback_page_is_refused_by_default_and_never_asked(web_site: Site) -> None:
    for url in (
        web_site.page("sourdough-blog.html"),
        web_site.url.replace("127.0.0.1", "localhost"),
    ):
        reason = refused(url, Limits())  # WEB_ALLOW_PRIVATE=false, the default
        assert "not a public address" in reason and "WEB_ALLOW_PRIVATE=true" in reason
    assert web_site.requests == []  # robots.txt included: nothing reached the server


def test_a_redirect_to_a_refused_address_is_checked_at_connect_and_never_reaches_it(
    web_site: Site, decoy: Site
) -> None:
    web_site.redirect_to = decoy.page("sourdough-blog.html")
    only_first = ipaddress.ip_address("127.0.0.1")
    reason = refused(
        f"{web_site.url}/away", Limits(robots=False), allowed=lambda address: address == only_first
    )
    assert "127.0.0.2" in reason and "not a public address" in reason
    assert web_site.requests == ["/away"] and decoy.requests == []


def test_the_guard_checks_the_dns_answer_and_connects_to_the_address_it_checked(
    web_site: Site,
) -> None:
    port = int(web_site.url.rsplit(":", 1)[1])
    private = Guard(resolve=lambda host, port: ["10.1.2.3", "192.168.0.7"])
    with pytest.raises(Refused, match=r"bank\.example is 10\.1\.2\.3, 192\.168\.0\.7"):
        private.connect_tcp("bank.example", 443)
    # a name no DNS knows, answered by our resolver: the connection goes to that very address
    pinned = Guard(allowed=everywhere, resolve=lambda host, port: ["127.0.0.1"])
    stream = pinned.connect_tcp("pages.test", port, timeout=5)
    stream.write(b"GET /robots.txt HTTP/1.1\r\nHost: pages.test\r\nConnection: close\r\n\r\n")
    assert stream.read(4096).startswith(b"HTTP/1.1 200")
    stream.close()
    with pytest.raises(httpcore.ConnectError, match="cannot resolve"):
        Guard(allowed=everywhere).connect_tcp("no-such-host.invalid", 80, timeout=5)


def test_public_addresses_are_told_from_private_loopback_and_mapped_ones() -> None:
    for public in ("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "1.1.1.1"):
        assert is_public(ipaddress.ip_address(public)), public
    for private in (
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "224.0.0.1",
        "240.0.0.1",
    ):
        assert not is_public(ipaddress.ip_address(private)), private


def test_a_recorded_article_keeps_its_text_and_metadata_and_loses_its_boilerplate(
    web_site: Site,
) -> None:
    for name, expected in EXPECTED.items():
        url = web_site.page(name)
        page = read_page(fetched(web_site, f"/pages/{name}"), url, STAMP)
        text = " ".join(page.text.replace("*", "").replace("`", "").split())
        assert page.markdown and page.fetched_at == STAMP and page.etag
        assert (page.title, page.site, page.author, page.published, page.canonical) == (
            expected["title"],
            expected["site"],
            expected["author"],
            expected["published"],
            expected["canonical"],
        ), name
        missing = [s for s in expected["article"] if " ".join(s.split()) not in text]
        left = [s for s in expected["boilerplate"] if s in text]
        assert not missing, (name, missing)
        assert len(left) <= 1, (name, left)  # measured: 1 of 62 left over all five pages
        headings = [
            line.lstrip("#").strip() for line in page.text.split("\n") if line.startswith("##")
        ]
        assert headings == expected["headings"], name
        assert page.link == page.final_url  # its canonical URL is on another host


def test_a_canonical_url_counts_on_the_host_fetched_and_never_on_another(web_site: Site) -> None:
    html = web_site.pages["/pages/bike-lanes-news.html"].decode()
    elsewhere = EXPECTED["bike-lanes-news.html"]["canonical"]
    for canonical, link in (
        (elsewhere, web_site.page("news.html")),  # another host: the address fetched
        (web_site.url + "/local/bike-lanes", web_site.url + "/local/bike-lanes"),
    ):
        web_site.pages["/pages/news.html"] = html.replace(elsewhere, canonical).encode()
        page = read_page(fetched(web_site, "/pages/news.html"), web_site.page("news.html"), STAMP)
        assert (page.canonical, page.link) == (canonical, link)


def test_a_page_read_twice_in_one_process_keeps_all_its_text(web_site: Site) -> None:
    # trafilatura's own de-duplication would drop the paragraphs it saw before
    got = fetched(web_site, "/pages/connection-pool-docs.html")
    first, second = (read_page(got, web_site.url, STAMP) for _ in range(2))
    assert first == second and len(first.text) > 1500


def test_a_redirect_chain_is_followed_and_one_past_the_limit_is_a_named_failure(
    web_site: Site,
) -> None:
    got = fetched(web_site, "/hop/1", Limits(allow_private=True, max_redirects=HOPS))
    assert got.url.endswith("/pages/connection-pool-docs.html")
    assert "more than WEB_MAX_REDIRECTS=2 redirects" in refused(
        f"{web_site.url}/hop/1", Limits(allow_private=True, max_redirects=HOPS - 1)
    )
    assert "WEB_MAX_REDIRECTS" in refused(f"{web_site.url}/loop")


def test_each_limit_is_a_failure_that_names_its_setting(web_site: Site) -> None:
    assert refused(f"{web_site.url}/missing") == "HTTP 404 Not Found"
    slow = refused(f"{web_site.url}/slow", Limits(allow_private=True, timeout=0.5))
    assert slow == "no answer within WEB_TIMEOUT=0.5s"
    huge = refused(f"{web_site.url}/huge", Limits(allow_private=True, max_bytes=1_000_000))
    assert huge == "more than WEB_MAX_BYTES=1,000,000 bytes"
    declared = refused(
        web_site.page("sourdough-blog.html"), Limits(allow_private=True, max_bytes=1000)
    )
    assert "more than WEB_MAX_BYTES=1,000" in declared and "bytes," in declared
    assert refused(f"{web_site.url}/image.png") == (
        "content type image/png is not one of WEB_CONTENT_TYPES"
    )
    only_html = Limits(allow_private=True, content_types=("text/html",))
    assert "application/pdf is not one of" in refused(f"{web_site.url}/paper.pdf", only_html)
    assert "only http and https" in refused("file:///etc/passwd")
    assert "only http and https" in refused("javascript:alert(1)")


def test_robots_txt_is_honoured_unless_web_robots_is_off(web_site: Site) -> None:
    reason = refused(f"{web_site.url}/private/page.html")
    assert "robots.txt disallows it" in reason and "WEB_ROBOTS=false" in reason
    assert "/private/page.html" not in web_site.requests
    assert fetched(web_site, "/private/page.html", Limits(allow_private=True, robots=False))
    assert web_site.requests.count("/robots.txt") == 1  # read once per site and fetcher


def test_a_pdf_is_read_page_by_page_and_plain_text_as_it_is(web_site: Site) -> None:
    paper = read_page(fetched(web_site, "/paper.pdf"), f"{web_site.url}/paper.pdf", STAMP)
    assert paper.content_type == "application/pdf" and paper.markdown
    assert "## p. 1" in paper.text and "## p. 2" in paper.text
    assert all(" ".join(p.split()) in " ".join(paper.text.split()) for p in PDF_PAGES)
    notes = read_page(fetched(web_site, "/notes.txt"), f"{web_site.url}/notes.txt", STAMP)
    assert (notes.text, notes.markdown, notes.content_type) == (PLAIN, False, "text/plain")


def test_an_unchanged_page_is_not_downloaded_again(web_site: Site) -> None:
    first = fetched(web_site, "/pages/shakshuka-recipe.html")
    with Fetcher(OPEN) as fetcher:
        again = fetcher.fetch(web_site.page("shakshuka-recipe.html"), etag=first.etag)
        assert again == NOT_MODIFIED
        web_site.pages["/pages/shakshuka-recipe.html"] += b"<!-- edited -->"
        changed = fetcher.fetch(web_site.page("shakshuka-recipe.html"), etag=first.etag)
    assert isinstance(changed, Fetched) and changed.etag != first.etag


def test_one_page_saved_twice_in_different_spellings_has_one_name() -> None:
    spellings = [
        "https://www.Example.com/blog/raft/?utm_source=feed&utm_medium=rss#comments",
        "http://example.com/blog/raft",
        "https://example.com:443/blog/raft/",
    ]
    assert {url_key(u) for u in spellings} == {"example.com/blog/raft"}
    assert len({page_source(u) for u in spellings}) == 1
    assert page_source(spellings[0]).startswith("web/example.com/blog-raft-")
    assert page_source("https://example.com/?id=2") != page_source("https://example.com/?id=3")
    assert page_source("https://example.com/").startswith("web/example.com/home-")
