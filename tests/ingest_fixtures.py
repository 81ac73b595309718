"""Helpers for the ingest, store, query and ingest_check tests: settings, notes, hashes, scripts.

Also a pytest plugin (tests/conftest.py): the `settings`, `client` and `store` fixtures of one
test's notes folder, embedded Qdrant and the MiniLM embedder in this process (embedder_fixtures;
`process_settings` for a test whose scripts need the embedder as a process).
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import REPO_ROOT, UNREACHABLE_EMBEDDER, build_settings

from kb.core.schema import DENSE, point_id
from kb.core.settings import Settings

# kb.app (the ingest, the store, the web and YouTube sources) is imported where it is used:
# every pytest run loads this plugin, and a test that needs none of it should not wait for it.
if TYPE_CHECKING:
    from kb.embedding.client import EmbedClient
    from kb.store.points import Store

KIMCHI = """---
tags: [Korean Cuisine, "recipes ", korean   cuisine]
topic: How I make kimchi at home.
document_date: 2024-03-01
---
# Kimchi

Salt a napa cabbage for two hours, rinse it, then rub in a paste of gochugaru, garlic,
ginger and fish sauce. Ferment it at room temperature for two days, then refrigerate.
"""
BREAD = """Knead the dough for ten minutes, let it rise for an hour, shape the loaf and bake it
in a hot oven until the crust is brown and it sounds hollow when tapped.
"""
SHOCK = """---
tags: aerodynamics
document_date: 2023-11-05 14:30:00
---
Across a normal shock wave in supersonic flow the pressure and density jump while the
velocity drops below the speed of sound.
"""


def make_settings(tmp_path: Path, embed_url: str = UNREACHABLE_EMBEDDER, **overrides) -> Settings:
    """Settings for one test: notes in tmp/data, state in tmp/state, embedded Qdrant in
    tmp/qdrant, no .env read (helpers.build_settings)."""
    return build_settings(embed_url, root=tmp_path, **overrides)


def in_process_qdrant(monkeypatch: pytest.MonkeyPatch, folder: Path) -> str:
    """A QDRANT_URL that qdrant-client's in-process implementation of a server's API answers,
    from `folder`: the server engine's code path (kb.store.server) with no server running."""
    from qdrant_client import QdrantClient

    from kb.store.server import ServerEngine

    def connect(cls: type[ServerEngine], url: str, api_key: str = "") -> ServerEngine:
        return cls(QdrantClient(path=str(folder)), f"Qdrant at {url} (QDRANT_URL)")

    monkeypatch.setattr(ServerEngine, "connect", classmethod(connect))
    return "http://qdrant.in-process.test:6333"


def ingest_notes(
    folder: Path,
    embed_url: str,
    notes: dict[str, str],
    transport: httpx.BaseTransport | None = None,
) -> Settings:
    """Write `notes` (source -> text) into a notes folder under `folder` and ingest them all
    through the embedder at `embed_url` (`transport`: the in-process one's, with
    IN_PROCESS_EMBED_URL); the store is closed again, so a module can share the corpus across
    tests."""
    settings = make_settings(folder, embed_url)
    for name, text in notes.items():
        write(settings.NOTES_DIR / name, text)
    from kb.app.backend import embed_client, open_store
    from kb.app.ingest import run

    with open_store(settings) as store, embed_client(settings, transport=transport) as client:
        assert sorted(run(settings, client, store).ingested) == sorted(notes)
    return settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """One test's settings; the embedder is the in-process one (`client` reaches it)."""
    return make_settings(tmp_path, IN_PROCESS_EMBED_URL)


@pytest.fixture
def process_settings(tmp_path: Path, embedder_url: str) -> Settings:
    """One test's settings with the embedder as a process: for scripts the test runs."""
    return make_settings(tmp_path, embedder_url)


@pytest.fixture
def client(settings: Settings, embedder_transport: httpx.BaseTransport) -> Iterator[EmbedClient]:
    """The client of `settings`' embedder (in this process, or `process_settings`' process)."""
    from kb.app.backend import embed_client

    with embed_client(settings, transport=embedder_transport) as opened:
        yield opened


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    from kb.app.backend import open_store

    with open_store(settings) as opened:
        yield opened


def check_consistent(store: Store, settings: Settings) -> None:
    """Every note in ingested/ has exactly its current chunks in Qdrant, embedded; a note still
    in the inbox has none, or (a stopped run stored it by its words first, kb.ingest.run) all
    its current chunks marked PENDING, for the next run to embed; nothing else is stored."""
    from kb.content.chunking import chunk_note
    from kb.content.notes import read_note
    from kb.core.schema import EMBEDDING, PENDING

    def chunks(path: Path, source: str) -> int:
        return len(chunk_note(read_note(path, source, max_bytes=settings.NOTE_MAX_BYTES)))

    done = settings.NOTES_DIR / "ingested"
    expected = {
        path.relative_to(done).as_posix(): chunks(path, path.relative_to(done).as_posix())
        for path in done.rglob("*")
        if path.is_file() and path.suffix.lower() in (".md", ".txt")
    }
    payloads = store.payloads()
    ids = [point for point, _ in payloads]
    assert len(ids) == len(set(ids)), "duplicate points"
    found: dict[str, list[int]] = {}
    pending: dict[str, list[int]] = {}
    for _, payload in payloads:
        into = pending if payload.get(EMBEDDING) == PENDING else found
        into.setdefault(payload["source"], []).append(payload["chunk_index"])
    assert {s: sorted(i) for s, i in found.items()} == {
        s: list(range(n)) for s, n in expected.items()
    }, "orphan, stale or missing chunks"
    assert not set(pending) & set(expected), "a note handed over with chunks left pending"
    inbox = {s for s in pending if (settings.NOTES_DIR / s).is_file()}
    assert inbox == set(pending), f"pending chunks of no note in the inbox: {set(pending) - inbox}"
    waiting = {s: chunks(settings.NOTES_DIR / s, s) for s in pending}
    assert {s: sorted(i) for s, i in pending.items()} == {
        s: list(range(n)) for s, n in waiting.items()
    }, "stale or missing pending chunks"
    assert sorted(ids) == sorted(
        point_id(s, i) for s, n in (expected | waiting).items() for i in range(n)
    )


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def tree_state(root: Path) -> dict[str, str]:
    """Every entry under `root` (links not followed) -> sha256 of its bytes, or its kind.

    The ingest lock file is left out: ingest creates it beside the notes.
    """
    state: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                state[rel] = "link:" + os.readlink(path)
            elif stat.S_ISDIR(mode):
                state[rel] = "dir"
            elif stat.S_ISREG(mode):
                state[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                state[rel] = "special"
    return state


def script_env(settings: Settings, **extra: str) -> dict[str, str]:
    """Environment that makes a repo script use exactly these settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in Settings.model_fields  # nothing from the developer's shell
    }
    env.update(
        EMBED_URL=settings.EMBED_URL,
        NOTES_DIR=str(settings.NOTES_DIR),
        STATE_DIR=str(settings.STATE_DIR),
        COLLECTION=settings.COLLECTION,
        EMBED_RETRIES=str(settings.EMBED_RETRIES),
        LOG_LEVEL="WARNING",
    )
    if settings.QDRANT_PATH:
        env["QDRANT_PATH"] = settings.QDRANT_PATH
    else:
        env["QDRANT_URL"] = settings.QDRANT_URL
    env.update(extra)
    return env


def run_script(
    script: str, *args: str, env: dict[str, str], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run a repo entry script (ingest.py, query.py ...) with this venv's Python, in `cwd`."""
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / script), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# An ingest that parks itself at a chosen point so a test can SIGKILL it exactly there:
#   argv[1] = "first-done"     when the first note is reported done (its group is stored and
#                              moved; the next groups are not stored yet)
#           = "stored:NAME"    after Qdrant acknowledged the group holding note NAME, before
#                              that group's moves
#   argv[2] = "rebuild" to run a rebuild instead of a plain ingest
KILLABLE_INGEST = """
import sys
from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.ingest.options import IngestOptions
from kb.ingest.progress import Progress
from kb.core.settings import get_settings

stop_at = sys.argv[1]


class ParkingProgress(Progress):
    def stored(self, sources):
        if stop_at.startswith("stored:") and stop_at[len("stored:") :] in sources:
            self.park("stored " + ",".join(sources))

    def done(self, source, chunks):
        if stop_at == "first-done":
            self.park("done " + source)

    def park(self, line):
        print(line, flush=True)
        sys.stdin.read()  # wait here until killed


settings = get_settings()
with open_store(settings) as store, embed_client(settings) as client:
    options = IngestOptions(rebuild=sys.argv[2:] == ["rebuild"], progress=ParkingProgress())
    run(settings, client, store, options)
print("finished", flush=True)
"""

# Holds the ingest lock and the embedded storage, as a running ingest does, until stdin closes.
LOCK_HOLDER = """
import sys
from kb.app.backend import open_store
from kb.core.settings import get_settings
from kb.core.state import State

settings = get_settings()
with State(settings.STATE_DIR).lock(), open_store(settings):
    print("locked", flush=True)
    sys.stdin.read()
"""


def count_points(store: Store, source: str | None = None) -> int:
    from kb.store.query import source_filter

    """Points stored (of one note), soft-deleted ones too."""
    flt = source_filter([source]) if source is not None else None
    return store.count(flt, deleted=True)


def stored_vectors(store: Store, ids: list[str]) -> dict[str, list[float]]:
    """Stored dense vectors by point id."""
    found = store.records(list(ids), vectors=[DENSE])
    return {pid: list(vectors[DENSE]) for pid, (_, vectors) in found.items()}
