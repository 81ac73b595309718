"""Attacks by one hostile item, kept as repeatable cases (issue 46's live attack found each one
stopping every sync): a malformed bookmark address, a file nested thousands deep (frontmatter, a
canvas, a `.json`, a notebook, a Chromium Bookmarks file), a YAML alias bomb. The rule they
check: one hostile item fails alone, by name, with a one-line reason of bounded length, and the
sync of everything else goes on (kb.core.limits, the per-item guard of kb.ingest.prepare, the
watcher's).

Real files, a real loopback web site (tests/web_fixtures.py), the real MiniLM embedder and
embedded Qdrant. Sizes are small enough to fail fast with the limits and large enough to stop a
sync without them.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import ipaddress
import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import serve_in_thread
from ingest_fixtures import BREAD, KIMCHI, make_settings, write
from starlette.applications import Starlette
from web_fixtures import Mark, Site, netscape_bookmarks

import kb.app.watch
from kb.app.backend import Backend, embed_client, open_store, read_config
from kb.app.backend import searcher as make_searcher
from kb.app.cli import fail
from kb.app.ingest import run
from kb.app.remember import SaveError, fetch_page, inbox_folder, write_note
from kb.app.watch import Watcher
from kb.core.errors import IngestError
from kb.core.limits import MAX_ALIASED, MAX_DEPTH, MAX_REASON
from kb.core.settings import Settings
from kb.ingest.progress import Summary, format_summary
from kb.search import SearchRequest, search
from kb.search.preview import preview
from kb.search.read import read_item
from kb.sources.web.fetch import Fetcher, FetchError, Guard, Limits, Refused, is_public
from kb.sources.web.page import page_source
from notes_server import dashboard
from notes_server.dashboard_sync import SyncRun
from notes_server.sessions import Sessions

MALFORMED = [  # each stopped every sync (issue 46, 1)
    "http://127.0.0.1:99999/x",
    "http://[::1/x",
    "http://127.0.0.1:-1/x",
    "http://①②⑦.0.0.1/x",
]


def sync(settings: Settings, transport: httpx.BaseTransport | None = None) -> Summary:
    with open_store(settings) as store, embed_client(settings, transport=transport) as client:
        return run(settings, client, store)


def failures(summary: Summary) -> dict[str, str]:
    reasons = {f.source: f.reason for f in summary.failed}
    for reason in reasons.values():  # bounded, on one line
        assert len(reason) <= MAX_REASON and "\n" not in reason, reason[:200]
    return reasons


def deep_json(key: str, depth: int) -> str:
    return f'{{"{key}": [{"[" * depth}{"]" * depth}]}}'


def alias_bomb(levels: int, key: str = "related") -> str:
    """YAML whose last anchor stands for 9**levels strings, in a few hundred bytes."""
    lines = ['l0: &l0 ["[[x]]", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for n in range(1, levels):
        lines.append(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]")
    return "\n".join([*lines, f"{key}: *l{levels - 1}"])


def note(frontmatter: str) -> str:
    return f"---\n{frontmatter}\n---\n# A note\n\nIts body reads as any other.\n"


BOMB_LEVELS = 5  # 9**5 = 59,049 values: past MAX_ALIASED, cheap to walk if it got through
assert 9**BOMB_LEVELS > MAX_ALIASED


def test_files_nested_thousands_deep_or_alias_bombs_fail_alone_and_the_rest_syncs(
    tmp_path: Path, embedder_transport
) -> None:
    vault = tmp_path / "vault"
    hostile = {
        "deep-list.md": (note("key: " + "[" * 5000 + "]" * 5000), "nested deeper"),
        "deep-map.md": (note("key: " + "{a: " * 3000 + "1" + "}" * 3000), "nested deeper"),
        "board.canvas": (deep_json("nodes", 100_000), "nested deeper"),
        "data.json": (deep_json("data", 100_000), "nested deeper"),
        "lab.ipynb": (deep_json("cells", 100_000), "nested deeper"),
        "config.yaml": ("key: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
        "bomb.md": (note(alias_bomb(BOMB_LEVELS)), "aliases stand for"),
        "private-bomb.md": (note(alias_bomb(BOMB_LEVELS, "private")), "aliases stand for"),
        "dated-bomb.md": (note(alias_bomb(BOMB_LEVELS, "document_date")), "aliases stand for"),
        # no alias: a long value's repr is no long reason
        "long-date.md": (note("document_date: [" + ", ".join(["x" * 50] * 2000) + "]"), "not a"),
    }
    for name, (text, _) in hostile.items():
        write(vault / name, text)
    write(vault / "kimchi.md", KIMCHI)
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL, NOTE_FOLDERS=f"vault={vault}")
    write(settings.NOTES_DIR / "bread.md", BREAD)
    write(settings.NOTES_DIR / "deep-inbox.md", note("key: " + "[" * 5000 + "]" * 5000))

    summary = sync(settings, transport=embedder_transport)
    assert sorted(summary.added) == ["bread.md", "vault/kimchi.md"]
    reasons = failures(summary)
    assert set(reasons) == {*(f"vault/{name}" for name in hostile), "deep-inbox.md"}
    for name, (_, said) in hostile.items():
        assert said in reasons[f"vault/{name}"], (name, reasons[f"vault/{name}"])
    assert f"{MAX_DEPTH} levels" in reasons["vault/board.canvas"]
    assert f"{MAX_ALIASED:,} values" in reasons["vault/bomb.md"]
    assert (settings.NOTES_DIR / "deep-inbox.md").exists()  # left where it was, untouched


def test_malformed_bookmark_addresses_and_a_deep_bookmarks_file_fail_alone(
    tmp_path: Path, embedder_transport, web_site: Site
) -> None:
    good = web_site.page("bike-lanes-news.html")
    marks = [Mark(url, f"bad {n}", ()) for n, url in enumerate(MALFORMED)]
    listed = netscape_bookmarks(tmp_path / "b.html", [*marks, Mark(good, "good", ())])
    deep = tmp_path / "Bookmarks"
    deep.write_text('{"roots": {"bookmark_bar": ' + deep_json("children", 5000) + "}}")
    settings = make_settings(
        tmp_path, IN_PROCESS_EMBED_URL, BOOKMARKS=f"{listed},{deep}", WEB_ALLOW_PRIVATE=True
    )
    write(settings.NOTES_DIR / "bread.md", BREAD)

    summary = sync(settings, transport=embedder_transport)
    assert sorted(summary.added) == ["bread.md", page_source(good)]
    reasons = failures(summary)
    assert set(reasons) == {*MALFORMED, str(deep)}
    for url in MALFORMED:
        assert reasons[url].startswith("not a valid web address"), reasons[url]
    assert "nested deeper" in reasons[str(deep)]


@pytest.mark.parametrize("url", MALFORMED)
def test_save_url_refuses_a_malformed_address_with_a_reason(tmp_path: Path, url: str) -> None:
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL, WEB_ALLOW_PRIVATE=True)
    with pytest.raises(SaveError, match="not saved: not a valid web address"):
        fetch_page(settings, url)


def wait_for(check: Callable[[], object], what: str, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, f"timed out waiting until {what}"
        time.sleep(0.05)


def test_a_bug_in_one_batch_is_logged_and_the_watcher_keeps_watching(
    tmp_path: Path, embedder_transport, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL)
    calls = []
    real_run = kb.app.watch.run

    def first_fails(*args: object, **kwargs: object) -> Summary:
        calls.append(1)
        if len(calls) == 1:  # what a reader's RecursionError did before the per-item guard
            raise RecursionError("maximum recursion depth exceeded")
        return real_run(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kb.app.watch, "run", first_fails)
    backend = Backend(settings, embedder_transport)
    stop = threading.Event()
    watcher = Watcher(backend, stop=stop, retry_s=(0.1, 0.2))
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: watcher.failures >= 1 or not thread.is_alive(), "the first batch failed")
        write(settings.NOTES_DIR / "bread.md", BREAD)
        wait_for(
            lambda: (watcher.last and "bread.md" in watcher.last.added) or not thread.is_alive(),
            "bread.md is synced",
        )
        assert thread.is_alive(), "the watcher stopped"
    finally:
        stop.set()
        thread.join(30)
        backend.close()


# --- a hostile web server on loopback: bombs and trickles (issue 46, 2 and 3) ----------------


class Hostile:
    """A web server on 127.0.0.1 that answers every request with `answer(path, send)`; `sent`
    counts the bytes it got out before the client hung up."""

    def __init__(self, answer: Callable[[str, Callable[[bytes], None]], None]) -> None:
        self.answer = answer
        self.sent = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                got = conn.recv(4096)
                if not got:
                    return
                request += got
            path = request.split(b" ", 2)[1].decode()

            def send(data: bytes) -> None:
                if self.stop.is_set():
                    raise OSError("stopped")
                conn.sendall(data)
                self.sent += len(data)

            with contextlib.suppress(OSError):
                self.answer(path, send)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


@contextlib.contextmanager
def hostile(answer: Callable[[str, Callable[[bytes], None]], None]) -> Iterator[Hostile]:
    server = Hostile(answer)
    try:
        yield server
    finally:
        server.close()


def head(length: int | None = None, **fields: str) -> bytes:
    lines = ["HTTP/1.1 200 OK", "Content-Type: text/html"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in fields.items()]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


CAP = 100_000  # WEB_MAX_BYTES in these cases
ZEROS = 50_000_000  # what the bombs decode to: 500 times CAP


def fetch_error(url: str, **limits: object) -> str:
    limited = Limits(allow_private=True, robots=False, **limits)  # type: ignore[arg-type]
    with Fetcher(limited) as fetcher, pytest.raises(FetchError) as caught:
        fetcher.fetch(url)
    return str(caught.value)


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return gzip.compress(b"\0" * ZEROS, compresslevel=9)


def test_a_gzip_bomb_is_cut_off_at_the_limit_in_decoded_bytes_in_bounded_memory(
    bomb: bytes,
) -> None:
    assert len(bomb) < CAP  # on the wire it is within the limit
    with hostile(lambda _, send: send(head(len(bomb), Content_Encoding="gzip") + bomb)) as site:
        tracemalloc.start()
        try:
            reason = fetch_error(site.url + "/page", max_bytes=CAP)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 20 * CAP, f"{peak:,} bytes held while decoding it"  # not ZEROS
    assert reason == f"more than WEB_MAX_BYTES={CAP:,} bytes decoded"


def test_a_body_encoded_twice_is_refused_before_anything_is_decoded(bomb: bytes) -> None:
    twice = gzip.compress(bomb)
    answer = head(len(twice), Content_Encoding="gzip, gzip") + twice
    with hostile(lambda _, send: send(answer)) as site:
        tracemalloc.start()
        try:
            reason = fetch_error(site.url + "/page", max_bytes=CAP)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 20 * CAP, f"{peak:,} bytes held while decoding it"
    assert reason == "content encoded 2 times: refused (one at most)"


TRICKLE_S = 0.05  # a byte every 50 ms: each read gets one in time, the fetch never would
TRICKLED = 400  # the most a trickle sends (20 s) when nothing cuts it off


def trickle(send: Callable[[bytes], None], data: bytes) -> None:
    for byte in data[:TRICKLED]:
        send(bytes([byte]))
        time.sleep(TRICKLE_S)


def test_headers_or_a_body_trickled_a_byte_at_a_time_end_at_the_total_timeout() -> None:
    def answer(path: str, send: Callable[[bytes], None]) -> None:
        if path == "/headers":
            trickle(send, head(None, X_Padding="x" * 1000))
        else:
            send(head(1000))
            trickle(send, b"<p>" + b"x" * 997)

    for path in ("/headers", "/body"):
        with hostile(answer) as site:
            reason = fetch_error(site.url + path, timeout=0.5)
            sent = site.sent
        assert "WEB_TIMEOUT=0.5s" in reason, reason
        # 0.5 s of trickle is about 10 bytes (and its head); never all of TRICKLED
        assert sent < 200 + (len(head(1000)) if path == "/body" else 0), (path, sent)


def test_robots_txt_trickled_a_byte_at_a_time_ends_within_the_same_timeout() -> None:
    with hostile(lambda _, send: trickle(send, head(None, X_Padding="x" * 1000))) as site:
        limited = Limits(allow_private=True, timeout=0.5)
        with Fetcher(limited) as fetcher, pytest.raises(FetchError) as caught:
            fetcher.fetch(site.url + "/page")
        sent = site.sent
    assert "robots.txt could not be read" in str(caught.value)
    assert sent < 200, sent


# --- save_note through a linked folder (issue 46, 5; a NUL: 8) -------------------------------


@pytest.mark.parametrize("folder", ["lnk", "lnk/deeper", "real/lnk", "real/file.md/x"])
def test_save_note_never_writes_through_a_linked_folder_or_a_file(
    tmp_path: Path, folder: str
) -> None:
    settings = make_settings(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write(settings.NOTES_DIR / "real" / "file.md", BREAD)
    (settings.NOTES_DIR / "lnk").symlink_to(elsewhere)
    (settings.NOTES_DIR / "real" / "lnk").symlink_to(elsewhere)
    with pytest.raises(SaveError, match="is a link or a file, not a folder of the inbox"):
        write_note(settings, inbox_folder(settings, folder), "Hello", "# Hello\n\nthere\n")
    assert list(elsewhere.iterdir()) == []
    assert sorted(p.name for p in settings.NOTES_DIR.rglob("*.md")) == ["file.md"]


def test_save_note_writes_into_a_new_folder_inside_the_notes(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    settings.NOTES_DIR.mkdir(parents=True, exist_ok=True)
    source = write_note(settings, inbox_folder(settings, "new/inner"), "Hello", "# Hello\n")
    assert source == "new/inner/hello.md"
    assert (settings.NOTES_DIR / source).read_text() == "# Hello\n"


def test_a_control_character_in_save_notes_folder_is_refused_by_name(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    for folder in ("a\x00b", "a\x1b[2Jb"):
        with pytest.raises(SaveError, match="without control characters"):
            inbox_folder(settings, folder)


# --- %%comments%% (issue 46, 8): Obsidian hides them, so nothing returns them ---------------

COMMENTED = """# Release plan

The launch moves to March. %%the vault password is swordfish%% Marketing starts in February.

%%
the board does not know about the layoffs yet
%%

Support gets two more people before the launch.
"""


def test_comments_are_neither_stored_nor_returned_by_search_preview_or_read_note(
    tmp_path: Path, embedder_transport
) -> None:
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL)
    write(settings.NOTES_DIR / "plan.md", COMMENTED)
    assert sync(settings, transport=embedder_transport).added == ["plan.md"]
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        stored = " ".join(str(p["text"]) for _, p in store.payloads())
        hits = search(
            make_searcher(settings, store, client, client),
            SearchRequest("when does the launch happen", k=3),
        ).hits
        shown = preview(store, "plan.md")
        passage = read_item(read_config(settings), [store], "plan.md")
    returned = [stored, *(h.text for h in hits), *(s.text for s in shown.segments), passage.text]
    assert "Marketing starts in February" in stored and hits
    for text in returned:
        assert "swordfish" not in text and "layoffs" not in text, text
    # read_note's lines still match the file's line numbers
    assert passage.text.split("\n")[8].endswith("Support gets two more people before the launch.")


# --- IPv6 forms of a loopback address (issue 46, 8) ------------------------------------------

LOOPBACK_IN_IPV6 = [
    "::127.0.0.1",  # IPv4-compatible
    "::ffff:0:127.0.0.1",  # SIIT
    "64:ff9b::127.0.0.1",  # NAT64
    "64:ff9b:1::7f00:1",  # NAT64, local use
    "2002:7f00:1::1",  # 6to4
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
]


@pytest.mark.parametrize("address", LOOPBACK_IN_IPV6)
def test_ipv6_forms_of_a_loopback_address_are_refused_before_any_connection(
    address: str, web_site: Site
) -> None:
    assert not is_public(ipaddress.ip_address(address))
    port = int(web_site.url.rsplit(":", 1)[1])
    with pytest.raises(Refused, match="not a public address"):
        Guard(resolve=lambda host, port: [address]).connect_tcp("gateway.example", port)
    assert web_site.requests == []


def test_ipv6_forms_of_a_public_address_stay_public() -> None:
    for address in ("64:ff9b::8.8.8.8", "2002:808:808::1", "::ffff:0:8.8.8.8", "2606:4700::1111"):
        assert is_public(ipaddress.ip_address(address)), address


def test_file_names_holding_escape_sequences_are_printed_escaped(
    tmp_path: Path, embedder_transport
) -> None:
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL)
    write(settings.NOTES_DIR / "title\x1b]0;pwned\x07.md", "---\ntags: a\n---\n")  # no text
    write(settings.NOTES_DIR / "clear\x1b[2J.xyz", "not a note kind")
    write(settings.NOTES_DIR / "bread.md", BREAD)
    printed = format_summary(sync(settings, transport=embedder_transport), verbose=True)
    assert "title\\x1b]0;pwned\\x07.md" in printed and "clear\\x1b[2J.xyz" in printed
    assert "\x1b" not in printed and "\x07" not in printed
    # an error line naming one (the inbox stops on frontmatter that is not YAML) too
    write(settings.NOTES_DIR / "stop\x1b[2J.md", "---\ntags: [a\n---\nbody\n")
    with pytest.raises(IngestError) as caught:
        sync(settings, transport=embedder_transport)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        fail(str(caught.value))
    assert "stop\\x1b[2J.md" in stderr.getvalue() and "\x1b" not in stderr.getvalue()


# --- the dashboard's sync log (issue 46, 8): a client cannot hold hundreds open --------------


def test_sync_logs_open_at_once_are_capped_and_a_closed_one_frees_its_place(
    tmp_path: Path,
) -> None:
    backend = Backend(make_settings(tmp_path))
    served = dashboard.routes(backend, Sessions())
    page = served[0].endpoint.__self__  # type: ignore[attr-defined]
    page.sync.current = SyncRun(started_at="2026-12-07T03:00:00+00:00")  # a sync still running
    with (
        serve_in_thread(Starlette(routes=served)) as base,
        httpx.Client(base_url=base, timeout=10) as client,
        contextlib.ExitStack() as held,
    ):
        streams = [
            held.enter_context(client.stream("GET", "/sync/events"))
            for _ in range(dashboard.EVENT_STREAMS)
        ]
        assert {s.status_code for s in streams} == {200}
        refused = client.get("/sync/events")
        assert refused.status_code == 429 and refused.headers["retry-after"] == "10"
        streams[0].close()

        def admitted() -> bool:
            with client.stream("GET", "/sync/events") as again:
                return again.status_code == 200

        wait_for(admitted, "a closed sync log frees its place", timeout=30)
        page.sync.current.finish(ok=True)
    backend.close()
