"""The dashboard in real headless Chromium (Playwright driving Debian's chromium): the MCP
server in-process under uvicorn, the real MiniLM embedder, copies of the ingested notes.

Set DASHBOARD_SCREENSHOTS=folder to keep a PNG of each page (README's come from `make
screenshots`, tests/screenshots.py: a neutral setup, no machine paths).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
from dashboard_fixtures import (
    DELETED_NOTE,
    EVIL,
    TOKEN,
    WAITING,
    Dashboard,
    screenshot,
    sign_in,
)
from helpers import free_port
from mcp_fixtures import (
    NOTES,
    TAG_COUNTS,
    ServerFactory,
    call_tool,
    make_settings,
    serve_in_process,
)

KIMCHI_QUERY = "how long do I ferment napa cabbage with chili paste"


def mcp_call(url: str, tool: str, arguments: dict[str, Any]) -> Any:
    """call_tool from another thread: Playwright holds this thread's event loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call_tool, url, tool, arguments).result()


def text(page: Any, selector: str) -> str:
    return page.locator(selector).first.inner_text().strip()


def test_the_status_page_shows_the_index_counts_and_refreshes_itself(
    reader: Dashboard, page: Any
) -> None:
    page.goto(reader.url("/"))
    # every note of the corpus plus the hostile one, less the one deleted by hand
    assert text(page, "#count-notes") == str(len(NOTES))
    assert text(page, "#count-deleted") == "1"
    inbox = page.locator('tr[data-source="inbox"]')
    assert inbox.locator(".notes").inner_text() == str(len(NOTES))
    assert inbox.locator(".waiting").inner_text() == "0"
    assert "ready" in text(page, ".card")  # the embedder
    assert page.locator("svg.chart rect").count() == len(TAG_COUNTS)
    with page.expect_response(lambda r: "/status/panel" in r.url, timeout=15_000) as refresh:
        pass
    assert refresh.value.ok
    screenshot(page, "status")


def test_sync_streams_its_log_and_ends_with_the_summary(syncer: Dashboard, page: Any) -> None:
    page.goto(syncer.url("/"))
    before = int(text(page, "#count-notes"))
    page.goto(syncer.url("/sync"))
    page.click("#sync-button")
    # the page may show an earlier run's log (or, first in the session, none) until the
    # press's answer replaces it; a predicate that throws fails the wait at once
    page.wait_for_function(
        "() => { const end = document.getElementById('sync-end');"
        " const log = document.getElementById('sync-log');"
        " return !!end && !end.hidden && !!log && log.textContent.includes('ingested '); }",
        timeout=60_000,
    )
    log = text(page, "#sync-log")
    for name in WAITING:
        assert f"stored {name}" in log
    assert re.search(r"^ingested 2 notes .* failed 0$", log, re.M), log
    assert text(page, "#sync-end") == "sync finished"
    screenshot(page, "sync")
    page.goto(syncer.url("/"))
    assert text(page, "#count-notes") == str(before + 2)
    assert page.locator('tr[data-source="inbox"] .waiting').inner_text() == "0"


def test_a_sync_while_another_ingest_holds_the_lock_says_so(syncer: Dashboard, page: Any) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path\n"
         "from kb.core.state import State\n"
         f"with State(Path({str(syncer.settings.STATE_DIR)!r})).lock():\n"
         "    print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        page.goto(syncer.url("/sync"))
        page.click("#sync-button")
        busy = page.locator("#sync-busy")
        busy.wait_for(state="visible")
        assert f"another ingest is running (pid {holder.pid})" in busy.inner_text()
    finally:
        holder.communicate("", timeout=30)


def test_a_search_from_the_keyboard_returns_the_expected_note_first_and_keeps_it_in_the_url(
    reader: Dashboard, page: Any
) -> None:
    page.goto(reader.url("/"))
    page.keyboard.press("/")  # from any page: to the search box
    page.wait_for_url(re.compile(r"/search$"))
    page.locator("#q").wait_for()
    page.keyboard.type(KIMCHI_QUERY)
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/search\?q="))
    first = page.locator(".hit .source").first
    first.wait_for()
    assert first.inner_text() == "cooking/kimchi.md"
    assert parse_qs(urlparse(page.url).query)["q"] == [KIMCHI_QUERY]
    screenshot(page, "search")
    page.reload()  # the URL alone brings the same results back
    assert text(page, ".hit .source") == "cooking/kimchi.md"
    assert page.input_value("#q") == KIMCHI_QUERY


def test_a_result_opens_the_note_scrolled_to_the_highlighted_hit(
    reader: Dashboard, page: Any
) -> None:
    page.goto(reader.url("/search?q=Parametrised+tests+report+each&mode=keyword"))
    first = page.locator(".hit .source").first
    assert first.inner_text() == "code/pytest-fixtures.md"
    first.click()
    page.wait_for_url(re.compile(r"/preview\?.*#hit$"))
    hit = page.locator("#hit mark")
    assert "Parametrised tests run the same function" in hit.inner_text()
    assert page.locator("pre.segment").count() > 1  # the whole note, not just the passage
    box = page.evaluate(
        "() => { const r = document.getElementById('hit').getBoundingClientRect();"
        " return {top: r.top, bottom: r.bottom, scrolled: window.scrollY,"
        " height: window.innerHeight}; }"
    )
    assert box["scrolled"] > 0 and 0 <= box["top"] < box["height"], box
    screenshot(page, "preview")


def test_note_text_with_html_shows_as_text_and_runs_nothing(reader: Dashboard, page: Any) -> None:
    page.goto(reader.url("/search?q=hostile+alert+onerror&mode=keyword"))
    first = page.locator(".hit").first
    assert first.locator(".source").inner_text() == EVIL
    shown = first.locator("pre.text").inner_text()
    assert "<script>alert(1)</script>" in shown and "<img src=x onerror=alert(1)>" in shown
    assert page.locator("#results script, #results img").count() == 0
    first.locator(".source").click()
    page.wait_for_url(re.compile(r"/preview"))
    page.wait_for_load_state("networkidle")
    note = page.locator("article.note").inner_text()
    assert "<script>alert(1)</script>" in note and "<img src=x onerror=alert(1)>" in note
    assert page.locator("article script, article img").count() == 0
    assert page.dialogs == []


def test_a_post_from_another_origin_is_refused(reader: Dashboard, page: Any) -> None:
    # a form on another page (origin "null") posting to the dashboard
    page.set_content(
        f'<form method="post" action="{reader.url("/deleted/restore")}">'
        f'<input name="source" value="{DELETED_NOTE}"><button id="go">go</button></form>'
    )
    with page.expect_navigation() as sent:
        page.click("#go")
    assert sent.value.status == 403
    for origin in ("http://evil.example", None):
        headers = {"Origin": origin} if origin else {}
        refused = httpx.post(reader.url("/sync"), headers=headers)
        assert refused.status_code == 403, refused.text
    page.goto(reader.url("/deleted"))  # nothing was restored
    assert DELETED_NOTE in text(page, "#deleted")
    assert page.locator("text=sync started").count() == 0


def test_the_deleted_page_lists_notes_with_their_cause(reader: Dashboard, page: Any) -> None:
    page.goto(reader.url("/deleted"))
    row = page.locator("#deleted tbody tr").first
    assert DELETED_NOTE in row.inner_text() and "by hand" in row.inner_text()
    screenshot(page, "deleted")


def test_restore_and_delete_for_good_from_the_deleted_page(syncer: Dashboard, page: Any) -> None:
    note = "garden/tomatoes.md"
    mcp = syncer.url("/mcp")
    assert not mcp_call(mcp, "delete_note", {"source": note}).is_error
    page.goto(syncer.url("/deleted"))
    page.locator("tr", has_text=note).locator("button", has_text="Restore").click()
    page.wait_for_url(re.compile(r"/deleted\?done="))
    assert f"{note}: restored" in text(page, "[role=status]")
    assert page.locator("#deleted tr", has_text=note).count() == 0
    assert not mcp_call(mcp, "delete_note", {"source": note}).is_error
    page.goto(syncer.url("/deleted"))
    page.accept_dialogs = True  # the "for good?" confirmation
    page.locator("tr", has_text=note).locator("button", has_text="Delete for good").click()
    page.wait_for_url(re.compile(r"/deleted\?done=.*for\+good"))
    assert f"{note}: deleted for good" in text(page, "[role=status]")
    assert page.dialogs and "cannot be undone" in page.dialogs[0]
    gone = page.goto(syncer.url("/preview?source=" + note))
    assert gone is not None and gone.status == 404


def test_with_a_token_pages_ask_for_it_once_and_keep_it_in_a_strict_cookie(
    guarded: Dashboard, page: Any
) -> None:
    page.goto(guarded.url("/search?q=kimchi"))
    page.wait_for_url(re.compile(r"/login\?next="))
    screenshot(page, "login")
    page.fill("#token", "wrong")
    page.click("#login-form button")
    assert "not the token" in text(page, "[role=alert]")
    page.fill("#token", TOKEN)
    page.click("#login-form button")
    page.wait_for_url(re.compile(r"/search\?q=kimchi$"))
    assert page.locator(".hit").count() > 0
    (cookie,) = page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert TOKEN not in cookie["value"] and len(cookie["value"]) >= 32  # a session, not the token
    assert page.evaluate("document.cookie") == ""
    page.goto(guarded.url("/deleted"))  # read-only server: no write buttons
    assert page.locator("button", has_text="Restore").count() == 0
    mcp = page.request.post(guarded.url("/mcp"), data="{}")  # the cookie is not a bearer
    assert mcp.status == 401


def test_the_domain_and_rerank_switches_travel_in_the_url(reader: Dashboard, page: Any) -> None:
    page.goto(reader.url("/search"))
    page.fill("#q", KIMCHI_QUERY)
    page.select_option("#domain", "prose")
    page.uncheck("#rerank")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/search\?q="))
    page.locator(".hit .source").first.wait_for()
    asked = parse_qs(urlparse(page.url).query)
    assert asked["domain"] == ["prose"] and asked["rerank"] == ["off"]
    assert "(hybrid, prose)" in text(page, "#results .dim")  # first-stage order, prose only
    page.reload()
    assert page.input_value("#domain") == "prose" and not page.is_checked("#rerank")


LOGIN_URL = re.compile(r"/login\?next=")


def session_cookie(page: Any) -> dict[str, str]:
    """The signed-in page's cookie as a header another client could send."""
    (cookie,) = page.context.cookies()
    return {"Cookie": f"{cookie['name']}={cookie['value']}"}


def test_signing_out_ends_the_session_for_every_copy_of_its_cookie(
    guarded: Dashboard, page: Any
) -> None:
    sign_in(page, guarded)
    copy = session_cookie(page)
    assert httpx.get(guarded.url("/deleted"), headers=copy).status_code == 200
    page.goto(guarded.url("/deleted"))
    page.click("#logout button")
    page.wait_for_url(re.compile(r"/login$"))
    assert page.context.cookies() == []  # the browser forgot it
    page.goto(guarded.url("/deleted"))
    page.wait_for_url(LOGIN_URL)
    replayed = httpx.get(guarded.url("/deleted"), headers=copy)  # and the server too
    assert replayed.status_code == 303 and replayed.headers["location"].startswith("/login")


def test_a_restarted_server_signs_everyone_out(
    start_server: ServerFactory, embedder_url: str, store_copy: Any, tmp_path: Path, page: Any
) -> None:
    def start() -> Any:
        return start_server(EMBED_URL=embedder_url, QDRANT_PATH=str(store_copy()),
                            STATE_DIR=str(tmp_path / "state"), NOTES_DIR=str(tmp_path),
                            MCP_TOKEN=TOKEN)  # fmt: skip

    first = start()
    sign_in(page, first.base)
    copy = session_cookie(page)
    first.stop()
    again = start()  # another port, but cookies ignore ports: the browser sends it there too
    assert httpx.get(again.base + "/", headers=copy).status_code == 303
    page.goto(again.base + "/deleted")
    page.wait_for_url(LOGIN_URL)


def test_a_session_ends_when_its_time_is_up(
    embedder_url: str, store_copy: Any, tmp_path: Path, page: Any
) -> None:
    from notes_server import sessions

    settings = make_settings(embedder_url, store_copy(), NOTES_DIR=tmp_path,
                             STATE_DIR=tmp_path / "state", MCP_PORT=free_port(),
                             MCP_TOKEN=TOKEN)  # fmt: skip
    with serve_in_process(settings) as server:
        sign_in(page, server.base)
        (cookie,) = page.context.cookies()  # the browser drops it at the same time
        assert abs(cookie["expires"] - (time.time() + sessions.SESSION_TTL_S)) < 120
        page.goto(server.base + "/deleted")
        assert page.url == server.base + "/deleted"
        clock = server.app.sessions.clock
        server.app.sessions.clock = lambda: clock() + sessions.SESSION_TTL_S  # the hours pass
        page.goto(server.base + "/deleted")
        page.wait_for_url(LOGIN_URL)
