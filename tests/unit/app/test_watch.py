"""Watch mode (kb.app.watch): real files, the real MiniLM embedder, embedded Qdrant, watchfiles.

Most tests drive a Watcher in a thread of this process and end it with its stop event; one runs
`ingest.py --watch` and stops it with SIGINT, one the MCP server with MCP_WATCH=true.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import REPO_ROOT, free_port
from ingest_fixtures import BREAD, KIMCHI, make_settings, script_env, write
from mcp_fixtures import call_tool, results

from kb.app.backend import Backend
from kb.app.watch import Watcher
from kb.core.schema import FILE_DELETED
from kb.core.settings import Settings
from kb.core.state import State
from kb.ingest import lifecycle
from kb.ingest.progress import Progress
from kb.search.query import search
from kb.store import collection

KIMCHI_QUERY = "how do I ferment napa cabbage with gochugaru"
BREAD_QUERY = "how long should bread dough rise"


def wait_for(
    check: Callable[[], object], what: str, timeout: float = 60.0, every: float = 0.05
) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, f"timed out waiting until {what}"
        time.sleep(every)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


@pytest.fixture
def settings(tmp_path: Path, vault: Path) -> Settings:
    return make_settings(tmp_path, IN_PROCESS_EMBED_URL, NOTE_FOLDERS=f"vault={vault}")


@contextmanager
def watching(
    settings: Settings,
    transport: httpx.BaseTransport | None = None,
    *,
    first_batch: bool = True,
    **options,
) -> Iterator[Watcher]:
    """A Watcher running in a thread (its first, full batch done unless told otherwise; the
    embedder through `transport` if given, else at EMBED_URL)."""
    backend = Backend(settings, transport)
    stop = threading.Event()
    watcher = Watcher(backend, stop=stop, **options)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        watcher.started.wait(30)
        if first_batch:
            wait_for(
                lambda: watcher.batches >= 1 or not thread.is_alive(), "the first batch is synced"
            )
            assert thread.is_alive(), "the watcher stopped"
        yield watcher
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive(), "the watcher did not stop"
        backend.close()


def found(watcher: Watcher, query: str) -> list[str]:
    backend = watcher.backend
    return [h.source or "" for h in search(backend.store(), backend.client, query, k=5)]


def stored(watcher: Watcher) -> set[str]:
    store = watcher.backend.store()
    if collection.info(store) is None:  # nothing synced yet
        return set()
    return {p["source"] for _, p in store.payloads() if not p.get("deleted_at")}


def test_a_saved_note_becomes_searchable_and_a_deleted_one_is_soft_deleted(
    settings: Settings, vault: Path, embedder_transport
) -> None:
    write(vault / "other.md", BREAD)  # two notes: deleting one is no mass deletion
    with watching(settings, embedder_transport) as watcher:
        write(vault / "food" / "kimchi.md", KIMCHI)
        wait_for(lambda: "vault/food/kimchi.md" in found(watcher, KIMCHI_QUERY), "searchable")
        (vault / "food" / "kimchi.md").unlink()
        wait_for(lambda: "vault/food/kimchi.md" not in found(watcher, KIMCHI_QUERY), "hidden")
        deleted = lifecycle.list_deleted(watcher.backend.store())
        assert [(d.source, d.cause) for d in deleted] == [("vault/food/kimchi.md", FILE_DELETED)]
        # the inbox too: a dropped note is ingested and moved; the move starts no batch
        write(settings.NOTES_DIR / "bread.md", BREAD)
        wait_for(lambda: watcher.last and "bread.md" in watcher.last.added, "bread.md synced")
        assert (settings.NOTES_DIR / "ingested" / "bread.md").exists()
        assert "bread.md" in found(watcher, BREAD_QUERY)
        batches = watcher.batches
        time.sleep(1.5)
        assert watcher.batches == batches
        assert not (settings.NOTES_DIR / "bread.md").exists()


def test_a_burst_of_300_files_is_synced_in_one_batch(
    settings: Settings, vault: Path, embedder_transport
) -> None:
    # a quiet window of 1 s: a loaded test machine may stall between two writes of the burst
    with watching(settings, embedder_transport, quiet_ms=1000) as watcher:
        assert watcher.batches == 1
        for n in range(300):  # one text (the `#` title, not the name, is embedded): fast
            write(vault / f"burst/{n:03}.md", "# Burst\n\nA line of the burst fixture.\n")

        def all_stored() -> bool:
            # searching meanwhile: embedded storage serves a search beside the batch's writes
            found(watcher, "the burst fixture line")
            return len(stored(watcher)) == 300

        wait_for(lambda: all_stored() and watcher.batches >= 2, "300 notes stored", 120, every=0.5)
        assert watcher.batches == 2
        assert watcher.last is not None and len(watcher.last.added) == 300


class EditsOnce(Progress):
    """Edits a note once the first group of a batch is stored: after its old text was read."""

    def __init__(self, path: Path, text: str) -> None:
        self.path, self.text, self.edited = path, text, False

    def stored(self, sources: Sequence[str]) -> None:
        if not self.edited:
            self.edited = True
            self.path.write_text(self.text, encoding="utf-8")


def test_an_edit_made_while_a_batch_runs_is_synced_by_the_next(
    settings: Settings, vault: Path, embedder_transport
) -> None:
    note = write(vault / "kimchi.md", KIMCHI)
    edit = EditsOnce(note, KIMCHI + "\nAdd a spoon of sugar: the revised recipe.\n")
    with watching(settings, embedder_transport, progress=edit) as watcher:
        assert edit.edited
        wait_for(lambda: watcher.batches >= 2, "the next batch")
        texts = [p["text"] for _, p in watcher.backend.store().payloads("vault/kimchi.md")]
        assert any("revised recipe" in text for text in texts)


class Forwarder:
    """A TCP port that forwards to the embedder once opened: until then nothing listens."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").split(":")
        self.target = (host, int(port))
        self.port = free_port()
        self.server: socket.socket | None = None

    def open(self) -> None:
        self.server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self.server is not None
        while True:
            try:
                near, _ = self.server.accept()
            except OSError:
                return
            far = socket.create_connection(self.target)
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def test_an_embedder_that_is_down_delays_the_batch_which_then_catches_up(
    tmp_path: Path, embedder_url: str, vault: Path
) -> None:
    proxy = Forwarder(embedder_url)
    settings = make_settings(
        tmp_path, f"http://127.0.0.1:{proxy.port}", NOTE_FOLDERS=f"vault={vault}"
    )
    try:
        with watching(settings, first_batch=False, retry_s=(0.2, 0.5)) as watcher:
            write(vault / "kimchi.md", KIMCHI)
            wait_for(lambda: watcher.failures >= 3, "three tries failed")
            assert watcher.batches == 0
            proxy.open()
            # the retry waits out its backoff, then embeds: a loaded machine takes a while
            wait_for(lambda: watcher.batches >= 1, "the batch is synced", timeout=180.0)
            assert watcher.batches == 1 and "vault/kimchi.md" in stored(watcher)
            assert "vault/kimchi.md" in found(watcher, KIMCHI_QUERY)
    finally:
        proxy.close()


class StopsWhenStored(Progress):
    def __init__(self, stop: Callable[[], None]) -> None:
        self.stop = stop

    def stored(self, sources: Sequence[str]) -> None:
        self.stop()


def test_stop_ends_the_watch_after_its_batch_and_removes_watcher_json(
    settings: Settings, vault: Path, embedder_transport
) -> None:
    status = State(settings.STATE_DIR).watcher_path
    with watching(settings, embedder_transport) as watcher:
        shown = json.loads(status.read_text(encoding="utf-8"))
        assert set(shown) == {"pid", "started_at", "folders", "last_batch_at", "last_batch_notes"}
        assert shown["pid"] == os.getpid() and shown["folders"] == ["vault"]
        assert shown["last_batch_at"] and shown["last_batch_notes"] == 0
        watcher.progress = StopsWhenStored(watcher.stop.set)
        for n in range(40):  # several groups: stop comes after the first, the batch goes on
            write(vault / f"n{n:02}.md", f"Note {n} of the stop fixture.\n")
        wait_for(watcher.stop.is_set, "the batch started storing")
    assert not status.exists()
    assert watcher.batches == 2 and len(watcher.last.added) == 40


def test_ingest_watch_syncs_a_dropped_note_and_stops_cleanly_on_sigint(
    settings: Settings, embedder_url, tmp_path: Path
) -> None:
    status = State(settings.STATE_DIR).watcher_path
    process = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "ingest.py"), "--watch"],
        env=script_env(settings, EMBED_URL=embedder_url, NOTE_FOLDERS=settings.NOTE_FOLDERS),
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: status.exists() or process.poll() is not None, "watcher.json")
        write(settings.NOTES_DIR / "kimchi.md", KIMCHI)
        moved = settings.NOTES_DIR / "ingested" / "kimchi.md"
        wait_for(lambda: moved.exists() or process.poll() is not None, "the note is ingested")
        shown = json.loads(status.read_text(encoding="utf-8"))
        assert shown["pid"] == process.pid and shown["folders"] == ["vault"]
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "stopping after the current batch" in err
    assert not status.exists()


def test_the_mcp_server_with_mcp_watch_makes_a_saved_note_searchable(
    start_server, tmp_path: Path, embedder_url: str, vault: Path
) -> None:
    (tmp_path / "data").mkdir(exist_ok=True)
    server = start_server(
        EMBED_URL=embedder_url,
        QDRANT_PATH=str(tmp_path / "qdrant"),
        NOTES_DIR=str(tmp_path / "data"),
        STATE_DIR=str(tmp_path / "state"),
        NOTE_FOLDERS=f"vault={vault}",
        MCP_WATCH="true",
    )
    write(vault / "kimchi.md", KIMCHI)

    def searchable() -> bool:
        answer = call_tool(server.url, "search_notes", {"query": KIMCHI_QUERY})
        return not answer.is_error and any(
            hit["source"] == "vault/kimchi.md" for hit in results(answer)
        )

    wait_for(searchable, "the MCP server finds the saved note")
    running = json.loads((tmp_path / "state" / "watcher.json").read_text(encoding="utf-8"))
    assert running["pid"] == server.proc.pid
