"""Soak: minutes of mixed load on loopback, then the index checked note by note.

    uv run --group dev bench/soak.py [--minutes 10] [--searchers 8] [--sync-every 3] [--quick]

One MiniLM embedder process (restarted once, in the middle) and this process, which serves the
MCP app (mcp/server.py's build_app under uvicorn, a thread), runs 8 searchers through the real
MCP SDK client over HTTP, and syncs a NOTE_FOLDERS folder every few seconds (a note edited, one
deleted, one added, then kb.ingest.run.run). The sync runs here, on the server's own store, because
embedded Qdrant (QDRANT_PATH) opens a folder in one process only: a separate ingest.py would be
refused while the server holds it. With a Qdrant server they would be two processes.

Prints requests, errors (those in the restart window apart, with their message), p50/p99
latency, the RSS of every process at start and end, and one JSON line. Targets: 0 failed
searches outside the restart window, 0 lost or duplicated notes, RSS growth <= 10 %.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.common import REPO_ROOT, bench_settings, minilm_path
from bench.fuzz import cpu_class
from kb.app.ingest import run
from kb.content.chunking import chunk_note
from kb.content.notes import read_note
from kb.core.errors import KbError
from kb.core.settings import Settings
from kb.ingest.options import IngestOptions
from notes_server import app as mcp_server

WORDS = ["sourdough", "tomato", "shock wave", "rust", "kimchi", "chess", "violin", "espresso",
         "marathon", "octopus", "haiku", "jupiter", "photosynthesis", "honey bee"]  # fmt: skip
RESTART_GRACE_S = 5.0  # after the new embedder is healthy, clients may still hold a failure


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def note_text(rng: random.Random, title: str) -> str:
    body = " ".join(f"{rng.choice(WORDS)} {rng.randrange(10**5)}." for _ in range(40))
    return f"# {title}\n\n{body}\n"


class Embedder:
    """`python embedder/app.py` serving MiniLM on a fixed loopback port, restartable."""

    def __init__(self, port: int, log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.env = {**os.environ, "HF_HUB_OFFLINE": "1", "EMBED_MODEL": str(minilm_path()),
                    "EMBED_HOST": "127.0.0.1", "EMBED_PORT": str(port)}  # fmt: skip
        self.env["LOG_LEVEL"] = "WARNING"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(REPO_ROOT / "embedder" / "app.py")],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-2000:]
            try:
                if httpx.get(f"{self.url}/health", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the embedder did not become healthy")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: list[tuple[float, str]] = field(default_factory=list)  # (when, message)
    syncs: int = 0
    sync_errors: list[tuple[float, str]] = field(default_factory=list)


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
                tally.errors.append((started, message[:200]))


def sync_loop(backend, vault: Path, every: float, stop: threading.Event, tally: Tally) -> None:
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


def check_index(backend, vault: Path) -> tuple[int, int, int]:
    """(lost or stale notes, duplicated chunks, orphan notes) after a final sync."""
    run(backend.settings, backend.client, backend.store(), IngestOptions(allow_deletes=True))
    payloads = backend.store().payloads()
    keys = [(p["source"], p["chunk_index"]) for _, p in payloads]
    duplicates = len(keys) - len(set(keys))
    stored: dict[str, dict[int, dict]] = {}
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


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return (
        statistics.quantiles(values, n=100, method="inclusive")[q - 1]
        if len(values) > 1
        else values[0]
    )


def soak(
    minutes: float, searchers: int, sync_every: float, notes: int, embed_url: str = ""
) -> dict:
    """The soak; with `embed_url` it uses that embedder and restarts nothing (the smoke test)."""
    tmp = Path(tempfile.mkdtemp(prefix="kb-soak-"))
    vault = tmp / "vault"
    vault.mkdir()
    rng = random.Random(18)
    for i in range(notes):
        (vault / f"note-{i}.md").write_text(note_text(rng, f"Note {i}"))
    port = uvicorn_port = 0

    with socket.socket() as a, socket.socket() as b:
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", 0))
        port, uvicorn_port = a.getsockname()[1], b.getsockname()[1]
    embedder = Embedder(port, tmp / "embedder.log")
    if embed_url:
        embedder.url = embed_url
    else:
        embedder.start()
    settings: Settings = bench_settings(
        tmp / "inbox", tmp / "qdrant", embedder.url, NOTE_FOLDERS=f"vault={vault}",
        MCP_PORT=uvicorn_port, LOG_LEVEL="WARNING",
    )  # fmt: skip
    settings.NOTES_DIR.mkdir()
    backend = mcp_server.Backend(settings)
    run(settings, backend.client, backend.store())  # the initial index
    app = mcp_server.build_app(backend)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=uvicorn_port, log_level="warning", ws="none")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{uvicorn_port}/mcp"
    me = os.getpid()
    rss: dict[str, list[float]] = {}
    tally = Tally()
    stop = threading.Event()
    syncer = threading.Thread(target=sync_loop, args=(backend, vault, sync_every, stop, tally))
    duration = minutes * 60
    started = time.monotonic()
    stop_at = started + duration
    window: list[float] = []

    def restart() -> None:
        # RSS "start" is taken after a warm-up (allocator pools, caches), then the restart
        time.sleep(min(30.0, duration / 10))
        rss["soak (server, searchers, sync)"] = [rss_mib(me)]
        if embedder.proc is None:
            return
        rss["embedder"] = [rss_mib(embedder.proc.pid)]
        time.sleep(duration / 2 - min(30.0, duration / 10))
        rss["embedder"].append(rss_mib(embedder.proc.pid))
        window.append(time.monotonic())
        embedder.stop()
        embedder.start()
        window.append(time.monotonic() + RESTART_GRACE_S)
        rss["embedder (restarted)"] = [rss_mib(embedder.proc.pid)]

    restarter = threading.Thread(target=restart, daemon=True)
    syncer.start()
    restarter.start()

    async def load() -> None:
        async with anyio.create_task_group() as group:
            for i in range(searchers):
                group.start_soon(searcher, url, stop_at, i, tally)

    anyio.run(load)
    stop.set()
    syncer.join()
    restarter.join()
    rss["soak (server, searchers, sync)"].append(rss_mib(me))
    if "embedder (restarted)" in rss:
        rss["embedder (restarted)"].append(rss_mib(embedder.proc.pid))
    lost, duplicates, orphans = check_index(backend, vault)
    server.should_exit = True
    thread.join(timeout=30)
    backend.close()
    embedder.stop()
    begin, end = [*window, 0.0, 0.0][:2]
    in_window = [e for e in tally.errors if begin <= e[0] <= end]
    outside = [e for e in tally.errors if not begin <= e[0] <= end]
    requests = len(tally.latencies) + len(tally.errors)
    return {
        "cpu": cpu_class(),
        "seconds": round(time.monotonic() - started, 1),
        "searchers": searchers,
        "requests": requests,
        "errors_outside_restart": len(outside),
        "errors_in_restart_window": len(in_window),
        "restart_window_s": round(end - begin - RESTART_GRACE_S, 1),
        "restart_error": in_window[0][1] if in_window else None,
        "other_errors": [m for _, m in outside[:3]],
        "p50_ms": round(1000 * percentile(tally.latencies, 50), 1),
        "p99_ms": round(1000 * percentile(tally.latencies, 99), 1),
        "syncs": tally.syncs,
        "sync_errors": len(tally.sync_errors),
        "lost_notes": lost,
        "duplicated_chunks": duplicates,
        "orphans": orphans,
        "rss_mib": {k: [round(v, 1) for v in vals] for k, vals in rss.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--searchers", type=int, default=8)
    parser.add_argument("--sync-every", type=float, default=3.0, help="seconds between syncs")
    parser.add_argument("--notes", type=int, default=30, help="notes in the synced folder")
    parser.add_argument("--quick", action="store_true", help="40 seconds: a smoke run")
    parser.add_argument(
        "--embed-url", default="", help="use this embedder and restart nothing (smoke runs)"
    )
    args = parser.parse_args(argv)
    minutes = 2 / 3 if args.quick else args.minutes
    r = soak(minutes, args.searchers, args.sync_every, args.notes, args.embed_url)
    print(f"cpu: {r['cpu']}; {r['seconds']}s, {r['searchers']} searchers")
    print(f"searches {r['requests']}: errors {r['errors_outside_restart']} outside the restart "
          f"window, {r['errors_in_restart_window']} in it ({r['restart_window_s']}s): "
          f"{r['restart_error']}")  # fmt: skip
    print(f"latency p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms")
    print(f"syncs {r['syncs']} ({r['sync_errors']} failed, caught up by the next); lost notes "
          f"{r['lost_notes']}, duplicated chunks {r['duplicated_chunks']}, "
          f"orphans {r['orphans']}")  # fmt: skip
    for name, values in r["rss_mib"].items():
        growth = 100 * (values[-1] / values[0] - 1) if values[0] else 0.0
        print(f"RSS {name}: {values[0]} -> {values[-1]} MiB ({growth:+.1f} %)")
    print(json.dumps(r))
    ok = r["errors_outside_restart"] == r["lost_notes"] == r["duplicated_chunks"] == 0
    return 0 if ok and r["orphans"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
