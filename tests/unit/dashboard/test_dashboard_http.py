"""The dashboard over plain HTTP (no browser): its security edges against the in-process servers
of dashboard_fixtures, and kb.search.preview's layout of stored chunks."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from dashboard_fixtures import EVIL, TOKEN, Dashboard
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import free_port
from mcp_fixtures import make_settings, serve_in_process

from kb.search.preview import Segment, layout, window
from notes_server import dashboard


def test_pages_forbid_inline_script_framing_and_other_origins(reader: Dashboard) -> None:
    for path in ("/", "/search?q=kimchi", "/sync", "/deleted", f"/preview?source={EVIL}"):
        page = httpx.get(reader.url(path))
        assert page.status_code == 200, path
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy and "http" not in policy  # nothing from elsewhere
    assert (
        "&lt;script&gt;alert(1)&lt;/script&gt;"
        in httpx.get(reader.url(f"/preview?source={EVIL}")).text
    )


def test_a_page_asked_for_under_another_host_name_is_refused(reader: Dashboard) -> None:
    assert httpx.get(reader.url("/"), headers={"Host": "evil.example"}).status_code == 421


@pytest.mark.parametrize(
    "source", ["../../../../etc/passwd", "/etc/passwd", "cooking/../../secret.md", "nope.md", ""]
)
def test_the_preview_shows_only_notes_the_index_holds(reader: Dashboard, source: str) -> None:
    answer = httpx.get(reader.url("/preview"), params={"source": source})
    assert answer.status_code == 404 and "root:" not in answer.text


@pytest.mark.parametrize("name", ["../server.py", "htmx.LICENSE.txt", "..%2Fserver.py"])
def test_only_the_dashboards_own_assets_are_served(reader: Dashboard, name: str) -> None:
    assert httpx.get(reader.url(f"/static/{name}")).status_code == 404
    assert httpx.get(reader.url("/static/htmx.min.js")).status_code == 200


def test_the_login_form_only_sends_you_back_to_this_site(guarded: Dashboard) -> None:
    origin = {"Origin": guarded.base}
    for target, lands in (("//evil.example/x", "/"), ("https://evil.example", "/"),
                          ("/search?q=a", "/search?q=a")):  # fmt: skip
        answer = httpx.post(guarded.url("/login"), headers=origin,
                            data={"token": TOKEN, "next": target})  # fmt: skip
        assert answer.status_code == 303 and answer.headers["location"] == lands
    wrong = httpx.post(guarded.url("/login"), headers=origin, data={"token": "x", "next": "/"})
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers


def test_writes_are_refused_while_write_tools_are_off(guarded: Dashboard) -> None:
    answer = httpx.post(
        guarded.url("/deleted/restore"),
        headers={"Origin": guarded.base, "Authorization": f"Bearer {TOKEN}"},
        data={"source": "garden/tomatoes.md"},
    )
    assert answer.status_code == 403 and "MCP_WRITE_TOOLS" in answer.text
    sync = httpx.post(
        guarded.url("/sync"), headers={"Origin": guarded.base, "Authorization": f"Bearer {TOKEN}"}
    )
    assert sync.status_code == 409 and "needs MCP_WRITE_TOOLS=true" in sync.text
    assert "sync started" not in sync.text


def test_a_read_only_server_shows_its_sync_page_as_a_notice_not_an_error(
    guarded: Dashboard,
) -> None:
    signed = {"Authorization": f"Bearer {TOKEN}"}
    page = httpx.get(guarded.url("/sync"), headers=signed).text
    assert 'class="notice" role="status" id="sync-blocked"' in page  # the default: no alarm
    assert 'class="problem"' not in page and "needs MCP_WRITE_TOOLS=true" in page


def test_times_are_readable_and_marked_for_the_readers_time_zone_and_dimensions_do_not_wrap(
    reader: Dashboard,
) -> None:
    assert str(dashboard.when("2026-12-07T02:49:08.123+00:00")) == (
        '<time datetime="2026-12-07T02:49:08.123000+00:00">2026-12-07 02:49 UTC</time>'
    )
    assert dashboard.when("not a time <b>") == "not a time <b>"  # escaped by the template
    panel = httpx.get(reader.url("/status/panel")).text
    assert re.search(
        r'last: <span id="last-sync"><time datetime="[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d UTC</time>',
        panel,
    ), panel
    assert re.search(r'<span class="nowrap">\(\d+-d\)</span>', panel)


def test_a_server_that_cannot_see_the_notes_shows_the_command_to_run(
    embedder_transport, tmp_path: Path
) -> None:
    settings = make_settings(IN_PROCESS_EMBED_URL, tmp_path / "qdrant",
                             NOTES_DIR=tmp_path / "absent", STATE_DIR=tmp_path / "state",
                             MCP_PORT=free_port(), MCP_WRITE_TOOLS=True)  # fmt: skip
    with serve_in_process(settings, transport=embedder_transport) as server:
        page = httpx.get(server.base + "/sync")
        pressed = httpx.post(server.base + "/sync", headers={"Origin": server.base})
    assert "cannot see your notes" in page.text and "uv run ingest.py" in page.text
    assert 'id="sync-button"' not in page.text
    assert pressed.status_code == 409 and not (tmp_path / "state").exists()


def chunk(index: int, text: str, start: int, line: int) -> dict:
    return {"chunk_index": index, "text": text, "char_start": start, "line_start": line}


def test_chunks_are_laid_out_in_file_order_with_overlaps_shown_once() -> None:
    # file: "---\ntags: a\n---\nAlpha beta.\nGamma delta.\n" ; the chunks overlap on "Gamma"
    segments = layout([chunk(1, "Gamma delta.", 28, 5), chunk(0, "Alpha beta.\nGamma", 16, 4)])
    assert segments == [
        Segment(0, 4, "Alpha beta.\nGamma", gap_before=True),  # the frontmatter is not stored
        Segment(1, 5, " delta.", gap_before=False),
    ]


def test_a_note_over_the_budget_keeps_a_window_around_the_hit() -> None:
    segments = [Segment(i, i * 10 + 1, f"{i}" * 100, False) for i in range(10)]
    kept, trimmed = window(segments, hit=7, budget=350)
    assert trimmed and [s.chunk_index for s in kept] == [6, 7, 8]
    alone, _ = window(segments, hit=2, budget=40)
    assert [(s.chunk_index, len(s.text)) for s in alone] == [(2, 40)]
    assert window(segments, hit=0, budget=1000) == (segments, False)
