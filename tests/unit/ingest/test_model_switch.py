"""Model changes without downtime (kb.ingest.switch): a new index is built beside the searched
one, searches keep working on the old one (the embedder serves the old model as
EMBED_PREVIOUS_MODEL), an interrupted build resumes, and the name switches atomically to the new
one, the old one deleted, with no orphan point. Real embedders (MiniLM, then a tiny Qwen3 beside
it), the real ingest, embedded storage on Qdrant's engine and qdrant-client's API (a server's)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import httpx
import pytest
from helpers import EmbedderProcess, free_port
from ingest_fixtures import make_settings, write
from mcp_fixtures import call_tool, serve_in_process, tool_answer

from kb.app import status as kb_status
from kb.app.backend import embed_client, open_store, searcher
from kb.app.ingest import run
from kb.core.errors import IngestError
from kb.core.schema import point_id
from kb.core.settings import Settings
from kb.ingest import switch
from kb.ingest.options import IngestOptions
from kb.ingest.progress import Progress
from kb.search import SearchRequest, search
from kb.store import collection
from kb.store.points import Store

NOTES = 1000
KIMCHI = "# Kimchi\n\nSalt a napa cabbage, rub in gochugaru paste and ferment it for two days.\n"
TOPICS = ["sailing knots", "tax forms", "garden hoses", "train timetables", "violin strings",
          "bicycle gears", "tea blends", "roof tiles", "chess clocks", "printer ink"]  # fmt: skip


def corpus(settings: Settings, n: int) -> dict[str, str]:
    notes = {"food/kimchi.md": KIMCHI}
    for i in range(n - 1):
        topic = TOPICS[i % len(TOPICS)]
        notes[f"misc/{i // 100:02d}/note-{i:04d}.md"] = (
            f"# Note {i}\n\nSome remarks about {topic}, number {i}, kept for later.\n"
        )
    for name, text in notes.items():
        write(settings.NOTES_DIR / name, text)
    return notes


@pytest.fixture(scope="module")
def new_embedder(start_embedder, tiny_qwen3_path: Path, minilm_path: Path) -> EmbedderProcess:
    """The embedder after the change: a tiny Qwen3 as EMBED_MODEL, MiniLM still served."""
    return start_embedder(
        {"EMBED_MODEL": str(tiny_qwen3_path), "EMBED_PREVIOUS_MODEL": str(minilm_path)}
    )


def no_orphans(store: Store, notes: dict[str, str]) -> int:
    """Every point belongs to a note of `notes`, with chunk indexes 0..n-1 and its own id."""
    found: dict[str, list[int]] = {}
    for pid, payload in store.payloads():
        source, index = payload["source"], payload["chunk_index"]
        assert pid == point_id(source, index), "a point under another note's id"
        found.setdefault(source, []).append(index)
    assert set(found) == set(notes), "orphans or missing notes"
    assert all(sorted(i) == list(range(len(i))) for i in found.values()), "orphan chunks"
    return sum(len(i) for i in found.values())


class Handshake(Progress):
    """Parks the ingest after its `after`th group until the test has searched meanwhile, and
    stops it there with `stop` when asked to."""

    def __init__(self, after: int, stop: threading.Event | None = None) -> None:
        self.groups, self.after, self.stop = 0, after, stop
        self.reached, self.searched = threading.Event(), threading.Event()

    def stored(self, sources: Sequence[str]) -> None:
        self.groups += 1
        if self.groups == self.after:
            self.reached.set()
            assert self.searched.wait(120), "the test did not search during the build"
            if self.stop is not None:
                self.stop.set()


@pytest.mark.slow  # 1,000 notes through the real embedder, twice
def test_a_model_switch_serves_searches_throughout_and_ends_on_the_new_model_without_orphans(
    tmp_path: Path, embedder_url: str, new_embedder: EmbedderProcess, tiny_qwen3_path: Path
) -> None:
    settings = make_settings(tmp_path, embedder_url, EMBED_BATCH_SIZE=64)
    notes = corpus(settings, NOTES)
    with open_store(settings) as store, embed_client(settings) as client:
        assert len(run(settings, client, store).ingested) == NOTES
        old_model = collection.require(store).model
    after = make_settings(tmp_path, new_embedder.url, EMBED_BATCH_SIZE=64)
    request = SearchRequest("how long do I ferment napa cabbage", k=3)
    with open_store(after) as store, embed_client(after) as client:
        look = searcher(after, store, client, embed_client(after, code=True))
        assert search(look, request).hits[0].source == "food/kimchi.md"  # the old index
        # 1. a build interrupted after its third group (a search in between)
        stop = threading.Event()
        parked = Handshake(3, stop)
        failures: list[BaseException] = []

        def rebuild(progress: Progress, stop: threading.Event | None = None) -> None:
            try:
                run(after, client, store, IngestOptions(progress=progress, stop=stop))
            except BaseException as exc:  # handed to the test thread
                failures.append(exc)

        worker = threading.Thread(target=rebuild, args=(parked, stop))
        worker.start()
        assert parked.reached.wait(300), "the build did not start"
        during = search(look, request)
        assert during.hits[0].source == "food/kimchi.md"
        assert collection.require(store).model == old_model
        parked.searched.set()
        worker.join(300)
        assert len(failures) == 1 and isinstance(failures[0], IngestError)
        assert "interrupted" in str(failures[0])
        report = kb_status.status(after, store)
        assert report.switch is not None and report.model == old_model
        assert 0 < report.switch.notes < report.switch.of == NOTES
        assert report.switch.model == str(tiny_qwen3_path)
        build = report.switch.collection
        assert search(look, request).hits[0].source == "food/kimchi.md"
        # 2. resumed to the end, searched throughout
        resumed = Handshake(2)
        failures.clear()
        worker = threading.Thread(target=rebuild, args=(resumed,))
        worker.start()
        assert resumed.reached.wait(300), "the resumed build did not start"
        searches = 0
        while True:  # until the build is done: each search is answered, by the old index
            model = collection.require(store).model
            found = search(look, request)
            # MiniLM's ranking while the old index served the whole search: the switch may land
            # during the last one (the model before and after it tells)
            if model == old_model == collection.require(store).model:
                assert found.hits[0].source == "food/kimchi.md", found.hits
            assert len(found.hits) == 3
            searches += 1
            resumed.searched.set()
            if not worker.is_alive():
                break
        worker.join()
        assert not failures, failures
        # 3. the name is the new index now: the new model, the old index gone, no orphans
        info = collection.require(store)
        assert info.model == str(tiny_qwen3_path) and store.target() == build
        assert store.collection_names() == sorted([build]), "the old index was not deleted"
        assert no_orphans(store, notes) == info.points
        assert kb_status.status(after, store).switch is None
        # the tiny Qwen3 ranks by noise: its vectors answer, the keyword half finds the note
        assert len(search(look, SearchRequest("napa cabbage", k=3, mode="semantic")).hits) == 3
        keyword = search(look, SearchRequest("napa cabbage gochugaru", k=3, mode="keyword"))
        assert keyword.hits[0].source == "food/kimchi.md"
    assert searches >= 1


def test_a_switch_under_way_shows_in_the_status_tool_and_the_dashboard_and_the_next_run_ends_it(
    tmp_path: Path, embedder_url: str, new_embedder: EmbedderProcess, tiny_qwen3_path: Path
) -> None:
    """An interrupted switch shows in the status tool and the dashboard's panel, and the next
    run ends it. (The alias calls on either engine: tests/unit/store/test_store.py.)"""
    settings = make_settings(tmp_path, embedder_url)
    notes = corpus(settings, 30)
    with open_store(settings) as store, embed_client(settings) as client:
        run(settings, client, store)
    after = make_settings(tmp_path, new_embedder.url, EMBED_BATCH_SIZE=4,
                          MCP_PORT=free_port(), MCP_TOKEN="")  # fmt: skip
    stop = threading.Event()
    with (
        open_store(after) as store,
        embed_client(after) as client,
        pytest.raises(IngestError, match="interrupted"),
    ):
        run(after, client, store, IngestOptions(progress=StopAfter(stop), stop=stop))
    with serve_in_process(after) as served:
        status = tool_answer(call_tool(served.url, "status"))
        assert isinstance(status, dict) and status["switch"]["of"] == 30
        assert 0 < status["switch"]["notes"] < 30
        panel = httpx.get(f"{served.base}/status/panel", timeout=30).text
        assert "rebuilding for" in panel and f"of {30} notes" in panel
    with open_store(after) as store, embed_client(after) as client:
        run(after, client, store)
        built = switch.build_name("notes", str(tiny_qwen3_path), client.dimensions)
        assert store.target() == built and store.collection_names() == [built]
        assert "notes" not in store.collection_names()
        assert no_orphans(store, notes) == collection.require(store).points
        assert asdict(kb_status.status(after, store))["switch"] is None


class StopAfter(Progress):
    """Asks the run to stop once its first group is stored."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop

    def stored(self, sources: Sequence[str]) -> None:
        self.stop.set()
