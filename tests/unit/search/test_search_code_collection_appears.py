"""A search remembers that the code collection does not exist (`Store.missing_lately`) and
still finds it once it does: at once when this process made it, within MISSING_TTL when
another process made it on a server."""

from __future__ import annotations

from pathlib import Path

import pytest
from ingest_fixtures import in_process_qdrant, make_settings, write

from kb.app.backend import embed_client, open_store, searcher
from kb.app.ingest import run
from kb.core.settings import Settings
from kb.search import SearchRequest, search
from kb.store import points
from kb.store.points import MISSING_TTL, Store

NOTE = "# Tomatoes\n\nWater the tomato plants every morning.\n"
CODE = "def water_tomatoes(litres: int) -> None:\n    print('watering', litres)\n"
QUERY = SearchRequest("water_tomatoes litres")  # domain all: notes and code


class Clock:
    """kb.store.points' monotonic clock, moved by hand: how long an answer stands, no sleep."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    found = Clock()
    monkeypatch.setattr(points, "monotonic", found)
    return found


def settings_for(
    storage: str, tmp_path: Path, embedder_url: str, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    overrides: dict[str, str] = {}
    if storage == "server":
        url = in_process_qdrant(monkeypatch, tmp_path / "q")
        overrides = {"QDRANT_PATH": "", "QDRANT_URL": url}
    settings = make_settings(tmp_path, embedder_url, **overrides)
    write(settings.NOTES_DIR / "garden/tomatoes.md", NOTE)
    return settings


def code_hits(settings: Settings, store: Store) -> list[str]:
    with embed_client(settings) as client, embed_client(settings, code=True) as code_client:
        found = search(searcher(settings, store, client, code_client), QUERY)
    return [h.source or "" for h in found.hits if h.domain == "code"]


@pytest.mark.parametrize("storage", ["embedded", "server"])
def test_a_code_collection_this_process_makes_is_searched_at_once(
    storage: str, tmp_path: Path, embedder_url: str, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    settings = settings_for(storage, tmp_path, embedder_url, monkeypatch)
    with open_store(settings) as store, embed_client(settings) as client:
        run(settings, client, store)
        assert code_hits(settings, store) == []  # seen missing, and remembered
        write(settings.NOTES_DIR / "tools/water.py", CODE)
        assert run(settings, client, store).ingested == ["tools/water.py"]
        assert code_hits(settings, store) == ["tools/water.py"]  # same moment: no TTL waited


def test_a_code_collection_another_process_makes_on_a_server_is_found_within_the_ttl(
    tmp_path: Path, embedder_url: str, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    settings = settings_for("server", tmp_path, embedder_url, monkeypatch)
    with open_store(settings) as store, embed_client(settings) as client:
        run(settings, client, store)
        assert code_hits(settings, store) == []
        # another writer: a store of its own on the same Qdrant, as another process has
        other = Store(store._engine, settings.COLLECTION)
        write(settings.NOTES_DIR / "tools/water.py", CODE)
        assert run(settings, client, other).ingested == ["tools/water.py"]
        clock.now += MISSING_TTL / 2
        assert code_hits(settings, store) == []  # the answer seen stands a while
        clock.now += MISSING_TTL / 2
        assert code_hits(settings, store) == ["tools/water.py"]
