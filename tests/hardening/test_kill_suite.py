"""The kill suite: ingest, folder sync and purge SIGKILLed at 25 seeded random moments, each kill
followed by a normal run. After every one: 0 duplicate points, 0 lost notes (every note file is
there and its current chunks are stored), 0 orphans (nothing stored that is neither a live note
nor a soft-deleted folder note). Real MiniLM embedder, embedded Qdrant, real files.

The killed run is a forked child of this already-imported process (starting a fresh Python that
imports qdrant-client costs seconds per kill); it opens its own store and embedder client, as a
separate ingest.py would, and SIGKILL releases the storage folder's lock with the process.
"""

from __future__ import annotations

import os
import random
import signal
import time
import warnings
from pathlib import Path

import pytest
from ingest_fixtures import make_settings, write

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.content.chunking import chunk_note
from kb.content.notes import read_note
from kb.core.schema import point_id
from kb.core.settings import Settings
from kb.ingest import lifecycle
from kb.ingest.options import IngestOptions
from kb.store.points import Store

SEED = 18
KILLS = 25
TOPICS = ["sourdough", "tomato seedlings", "shock waves", "rust ownership", "kimchi", "chess"]


def _note(rng: random.Random, title: str) -> str:
    body = " ".join(f"{rng.choice(TOPICS)} note {rng.randrange(10**6)}." for _ in range(8))
    return f"# {title}\n\n{body}\n\n## More\n\n{body[::-1]}\n"


def _killed(settings: Settings, op: str, delay: float) -> tuple[str, float | None]:
    """Run `op` in a forked child and SIGKILL it after `delay` seconds: how it ended, and how
    long it took when it finished first."""
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork in a threaded process; the child only runs kb code
        # and leaves with os._exit, never returning into pytest.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            with open_store(settings) as store, embed_client(settings) as client:
                if op == "purge":
                    lifecycle.purge(store, 0)
                else:
                    run(settings, client, store, IngestOptions(allow_deletes=True))
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    started = time.monotonic()
    while time.monotonic() - started < delay:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:  # finished before its kill: the moment was past its end
            ending = "finished" if os.WEXITSTATUS(status) == 0 else "failed"
            return ending, time.monotonic() - started
        time.sleep(0.002)
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "killed", None
    return ("finished" if os.WEXITSTATUS(status) == 0 else "failed"), None


def _check(settings: Settings, store: Store, vault: Path, written: set[str]) -> None:
    """0 duplicates, 0 lost notes, 0 orphans."""
    ingested = settings.NOTES_DIR / "ingested"
    assert not [p for p in settings.NOTES_DIR.iterdir() if p.name != "ingested"], "inbox left"
    files = {p.relative_to(ingested).as_posix(): p for p in ingested.rglob("*.md")}
    assert written <= set(files), f"note files lost: {sorted(written - set(files))}"
    live = {**files, **{f"vault/{p.relative_to(vault).as_posix()}": p for p in vault.rglob("*.md")}}
    payloads = store.payloads()
    keys = [(p["source"], p["chunk_index"]) for _, p in payloads]
    assert len(keys) == len(set(keys)), "duplicate points"
    assert all(pid == point_id(s, i) for (pid, _), (s, i) in zip(payloads, keys, strict=True))
    stored: dict[str, dict[int, dict]] = {}
    for _, p in payloads:
        stored.setdefault(p["source"], {})[p["chunk_index"]] = p
    for source, path in live.items():
        chunks = chunk_note(read_note(path, source, max_bytes=settings.NOTE_MAX_BYTES))
        points = stored.get(source, {})
        assert [points[i]["text"] for i in sorted(points)] == [c.text for c in chunks], (
            f"{source}: stored chunks are missing or stale"
        )
        assert not any(p.get("deleted_at") for p in points.values()), f"{source}: hidden"
    for source in set(stored) - set(live):
        assert source.startswith("vault/"), f"orphan: {source}"
        assert all(p.get("deleted_at") for p in stored[source].values()), f"orphan: {source}"


@pytest.mark.slow
@pytest.mark.process  # forked ingests, killed
def test_sigkill_at_25_seeded_points_of_ingest_sync_and_purge_leaves_a_consistent_index(
    tmp_path: Path, embedder_url: str
) -> None:
    rng = random.Random(SEED)
    vault = tmp_path / "vault"
    for i in range(5):
        write(vault / f"v{i}.md", _note(rng, f"Vault note {i}"))
    settings = make_settings(tmp_path, embedder_url, NOTE_FOLDERS=f"vault={vault}")
    written: set[str] = set()
    with open_store(settings) as store, embed_client(settings) as client:
        run(settings, client, store)
    endings: dict[str, int] = {}
    # how long each operation runs on this machine, learnt from the runs that finish before
    # their kill: the seeded moments are shares of it, so a fast machine is killed mid-run too
    span = {"ingest": 1.0, "sync": 1.0, "purge": 1.0}
    for kill in range(KILLS):
        op = rng.choice(["ingest", "sync", "purge"])
        if op == "ingest":
            for j in range(rng.randint(1, 3)):
                name = f"inbox-{kill}-{j}.md"
                write(settings.NOTES_DIR / name, _note(rng, f"Inbox note {kill}.{j}"))
                written.add(name)
            if written and rng.random() < 0.3:  # a new version of an ingested note
                name = rng.choice(sorted(written))
                write(settings.NOTES_DIR / name, _note(rng, f"Rewritten {name}"))
        elif op == "sync":
            notes = sorted(vault.glob("*.md"))
            edited = rng.choice(notes)
            edited.write_text(edited.read_text() + f"\nEdited at kill {kill}.\n")
            if len(notes) > 3:
                rng.choice([n for n in notes if n != edited]).unlink()
            write(vault / f"v-new-{kill}.md", _note(rng, f"Vault note new {kill}"))
        ending, took = _killed(settings, op, rng.uniform(0.0, 1.0) * span[op])
        if took is not None:
            span[op] = took
        endings[f"{op} {ending}"] = endings.get(f"{op} {ending}", 0) + 1
        # the normal run that follows every kill
        with open_store(settings) as store, embed_client(settings) as client:
            run(settings, client, store, IngestOptions(allow_deletes=True))
            if op == "purge":
                lifecycle.purge(store, 0)
            _check(settings, store, vault, written)
    print(f"kill suite endings: {endings}")
    assert sum(n for e, n in endings.items() if e.endswith("failed")) == 0, endings
    assert sum(n for e, n in endings.items() if e.endswith("killed")) >= KILLS // 2, endings
