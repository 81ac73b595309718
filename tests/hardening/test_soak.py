"""Soak: mixed load on loopback for a while, then the index checked note by note.

This process serves the MCP app (notes_server's build_app under uvicorn, in a thread), runs
searchers through the real MCP SDK client over HTTP, and syncs a NOTE_FOLDERS folder every few
seconds (a note edited, one deleted, one added, then kb.app.ingest.run) on the server's own
store: embedded Qdrant opens a folder in one process only, so a separate ingest.py would be
refused while the server holds it (with a Qdrant server they would be two processes). At the
end a final sync, then every note is checked: none lost or stale, no chunk twice, no orphan.

CI runs 12 s on the session's embedder and 40 s on an embedder of its own, restarted halfway;
`--soak-minutes 10 -s` is the published run (the figures are printed):
    .venv/bin/python -m pytest tests/hardening/test_soak.py --soak-minutes 10 -s
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from helpers import EMBEDDER_APP, EmbedderProcess, build_settings, free_port, serve_in_thread
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.common import cpu_name
from kb.app.backend import Backend
from kb.app.ingest import run
from kb.app.process import Child
from kb.content.chunking import chunk_note
from kb.content.notes import read_note
from kb.core.errors import KbError
from kb.ingest.options import IngestOptions
from notes_server import app as mcp_server

pytestmark = pytest.mark.slow

WORDS = ["sourdough", "tomato", "shock wave", "rust", "kimchi", "chess", "violin", "espresso",
         "marathon", "octopus", "haiku", "jupiter", "photosynthesis", "honey bee"]  # fmt: skip
RESTART_GRACE_S = 5.0  # after the new embedder is healthy, clients may still hold a failure
EMBEDDER_START_S = 180.0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def note_text(rng: random.Random, title: str) -> str:
    body = " ".join(f"{rng.choice(WORDS)} {rng.randrange(10**5)}." for _ in range(40))
    return f"# {title}\n\n{body}\n"


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    # (started, ended, message): a search in flight when the embedder stops may fail too
    errors: list[tuple[float, float, str]] = field(default_factory=list)
    syncs: int = 0
    sync_errors: list[tuple[float, str]] = field(default_factory=list)
    window: list[float] = field(default_factory=list)  # the restart: [start, end]
    rss: dict[str, list[float]] = field(default_factory=dict)


async def searcher(url: str, stop_at: float, seed: int, tally: Tally) -> None:
    rng = random.Random(seed)
    http = httpx2.AsyncClient(timeout=120)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        while time.monotonic() < stop_at:
            query = f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
            started = time.monotonic()
            try:
                result = await client.call_tool("search_notes", {"query": query, "k": 5})
                message = None
                if result.is_error:
                    message = " ".join(getattr(p, "text", "") for p in result.content)
            except Exception as exc:  # a transport failure is counted, not fatal
                message = f"{type(exc).__name__}: {exc}"
            if message is None:
                tally.latencies.append(time.monotonic() - started)
            else:
                tally.errors.append((started, time.monotonic(), message[:200]))


def sync_loop(
    backend: Backend, vault: Path, every: float, stop: threading.Event, tally: Tally
) -> None:
    rng = random.Random(7)
    n = len(list(vault.glob("*.md")))
    while not stop.wait(every):
        notes = sorted(vault.glob("*.md"))
        edited = rng.choice(notes)
        edited.write_text(edited.read_text() + f"\n{rng.choice(WORDS)} edit {tally.syncs}.\n")
        if len(notes) > 20:
            rng.choice([p for p in notes if p != edited]).unlink()
        (vault / f"added-{n}.md").write_text(note_text(rng, f"Added {n}"))
        n += 1
        try:
            run(
                backend.settings, backend.client, backend.store(), IngestOptions(allow_deletes=True)
            )
            tally.syncs += 1
        except KbError as exc:  # the embedder restarting: the next sync catches up
            tally.sync_errors.append((time.monotonic(), str(exc)[:200]))


def check_index(backend: Backend, vault: Path) -> tuple[int, int, int]:
    """(lost or stale notes, duplicated chunks, orphan notes) after a final sync."""
    run(backend.settings, backend.client, backend.store(), IngestOptions(allow_deletes=True))
    payloads = backend.store().payloads()
    keys = [(p["source"], p["chunk_index"]) for _, p in payloads]
    duplicates = len(keys) - len(set(keys))
    stored: dict[str, dict[int, dict[str, Any]]] = {}
    for _, p in payloads:
        stored.setdefault(p["source"], {})[p["chunk_index"]] = p
    live = {f"vault/{p.name}": p for p in vault.glob("*.md")}
    lost = 0
    for source, path in live.items():
        chunks = chunk_note(read_note(path, source, max_bytes=10**7))
        points = stored.get(source, {})
        texts = [points[i]["text"] for i in sorted(points)]
        hidden = any(p.get("deleted_at") for p in points.values())
        lost += texts != [c.text for c in chunks] or hidden
    orphans = sum(
        1
        for s in set(stored) - set(live)
        if not all(p.get("deleted_at") for p in stored[s].values())
    )
    return lost, duplicates, orphans


def percentile(values: list[float], q: int) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def restart_halfway(embedder: Child | None, health: str, duration: float, tally: Tally) -> None:
    """RSS "start" after a warm-up (allocator pools, caches), then the embedder restarted and
    waited for at `health`."""
    warm_up = min(30.0, duration / 10)
    time.sleep(warm_up)
    tally.rss["soak (server, searchers, sync)"] = [rss_mib(os.getpid())]
    if embedder is None:
        return
    tally.rss["embedder"] = [rss_mib(embedder.pid)]
    time.sleep(duration / 2 - warm_up)
    tally.rss["embedder"].append(rss_mib(embedder.pid))
    tally.window.append(time.monotonic())
    embedder.restart()
    embedder.wait_ready(health, EMBEDDER_START_S)
    tally.window.append(time.monotonic() + RESTART_GRACE_S)
    tally.rss["embedder (restarted)"] = [rss_mib(embedder.pid)]


def load(url: str, searchers: int, stop_at: float, tally: Tally) -> None:
    async def all_searchers() -> None:
        async with anyio.create_task_group() as group:
            for i in range(searchers):
                group.start_soon(searcher, url, stop_at, i, tally)

    anyio.run(all_searchers)


def soak(
    tmp: Path,
    minutes: float,
    searchers: int,
    sync_every: float,
    notes: int,
    embed_url: str,
    embedder: Child | None = None,
) -> dict[str, Any]:
    """The soak against the embedder at `embed_url`; `embedder`: restart it halfway."""
    vault = tmp / "vault"
    vault.mkdir()
    rng = random.Random(18)
    for i in range(notes):
        (vault / f"note-{i}.md").write_text(note_text(rng, f"Note {i}"))
    port = free_port()
    settings = build_settings(
        embed_url, root=tmp, NOTE_FOLDERS=f"vault={vault}", MCP_PORT=port, LOG_LEVEL="WARNING"
    )
    backend = Backend(settings)
    run(settings, backend.client, backend.store())  # the initial index
    tally, stop = Tally(), threading.Event()
    duration = minutes * 60
    started = time.monotonic()
    syncer = threading.Thread(target=sync_loop, args=(backend, vault, sync_every, stop, tally))
    health = f"{embed_url}/health"
    restarter = threading.Thread(target=restart_halfway, args=(embedder, health, duration, tally))
    with serve_in_thread(mcp_server.build_app(backend), port=port) as base:
        syncer.start()
        restarter.start()
        load(f"{base}/mcp", searchers, started + duration, tally)
        stop.set()
        syncer.join()
        restarter.join()
        tally.rss["soak (server, searchers, sync)"].append(rss_mib(os.getpid()))
        if embedder is not None:
            tally.rss["embedder (restarted)"].append(rss_mib(embedder.pid))
        lost, duplicates, orphans = check_index(backend, vault)
    backend.close()
    return summary(tally, time.monotonic() - started, searchers, (lost, duplicates, orphans))


def summary(
    tally: Tally, seconds: float, searchers: int, index: tuple[int, int, int]
) -> dict[str, Any]:
    begin, end = [*tally.window, 0.0, 0.0][:2]
    # a search counts in the restart window when it overlaps it (it may have started before)
    in_window = [e for e in tally.errors if e[0] <= end and e[1] >= begin]
    outside = [e for e in tally.errors if e not in in_window]
    lost, duplicates, orphans = index
    return {
        "cpu": cpu_name(),
        "seconds": round(seconds, 1),
        "searchers": searchers,
        "requests": len(tally.latencies) + len(tally.errors),
        "errors_outside_restart": len(outside),
        "errors_in_restart_window": len(in_window),
        "restart_window_s": round(end - begin - RESTART_GRACE_S, 1) if tally.window else 0.0,
        "restart_errors": sorted({m for _, _, m in in_window}),
        "other_errors": [m for _, _, m in outside[:3]],
        "p50_ms": round(1000 * percentile(tally.latencies, 50), 1),
        "p99_ms": round(1000 * percentile(tally.latencies, 99), 1),
        "syncs": tally.syncs,
        "sync_errors": len(tally.sync_errors),
        "lost_notes": lost,
        "duplicated_chunks": duplicates,
        "orphans": orphans,
        "rss_mib": {k: [round(v, 1) for v in vals] for k, vals in tally.rss.items()},
    }


def report(r: dict[str, Any]) -> str:
    lines = [
        f"cpu: {r['cpu']}; {r['seconds']}s, {r['searchers']} searchers",
        f"searches {r['requests']}: errors {r['errors_outside_restart']} outside the restart "
        f"window, {r['errors_in_restart_window']} in it ({r['restart_window_s']}s): "
        f"{r['restart_errors'][:1]}",
        f"latency p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms",
        f"syncs {r['syncs']} ({r['sync_errors']} failed, caught up by the next); lost notes "
        f"{r['lost_notes']}, duplicated chunks {r['duplicated_chunks']}, orphans {r['orphans']}",
    ]
    for name, values in r["rss_mib"].items():
        growth = 100 * (values[-1] / values[0] - 1) if values[0] else 0.0
        lines.append(f"RSS {name}: {values[0]} -> {values[-1]} MiB ({growth:+.1f} %)")
    return "\n".join(lines)


def test_a_short_soak_serves_every_search_and_keeps_every_note(
    embedder_url: str, tmp_path: Path
) -> None:
    r = soak(tmp_path, 12 / 60, searchers=2, sync_every=2.0, notes=8, embed_url=embedder_url)
    print(report(r))
    assert r["requests"] > 0 and r["errors_outside_restart"] == 0, r["other_errors"]
    assert r["syncs"] >= 2 and r["sync_errors"] == 0
    assert (r["lost_notes"], r["duplicated_chunks"], r["orphans"]) == (0, 0, 0)
    assert r["p50_ms"] > 0 and r["rss_mib"]["soak (server, searchers, sync)"][0] > 0


def test_a_soak_through_an_embedder_restart_fails_searches_only_while_it_reloads(
    minilm_path: Path, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    """Searches during the restart get the embedder's documented tool error, the syncs that
    fail are caught up by the next, and no note is lost."""
    minutes: float = pytestconfig.getoption("soak_minutes")
    port = free_port()
    env = EmbedderProcess.environment(
        {"EMBED_MODEL": str(minilm_path), "LOG_LEVEL": "WARNING"}, port
    )
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, str(EMBEDDER_APP)]
    with Child("embedder", argv, env=env, log=tmp_path / "embedder.log") as embedder:
        embedder.wait_ready(f"{url}/health", EMBEDDER_START_S)
        r = soak(tmp_path, minutes, searchers=8, sync_every=3.0, notes=30, embed_url=url,
                 embedder=embedder)  # fmt: skip
    print(report(r))
    assert r["errors_outside_restart"] == 0, r["other_errors"]
    assert all("embedder" in message for message in r["restart_errors"]), r["restart_errors"]
    assert r["requests"] > r["errors_in_restart_window"] and r["syncs"] >= 2
    assert (r["lost_notes"], r["duplicated_chunks"], r["orphans"]) == (0, 0, 0)
    assert len(r["rss_mib"]["embedder (restarted)"]) == 2
