"""Dashboard speed on a big collection: the status and search pages, server and browser time.

    uv run --group dev bench/dashboard.py [--notes N] [--quick] [--repeat R] [--no-browser] [--json]

Writes N synthetic notes (default 1,000; --quick: 100; a few paragraphs, tags from a pool of 24)
into a throwaway inbox and ingests them through kb.ingest.run.run with a real embedder (EMBED_URL
when set, else a MiniLM embedder started for the run) into embedded Qdrant. Then serves the MCP
server's app (mcp/server.py build_app: the dashboard included) under uvicorn on a free port and
times, R times each (default 10):

- server: GET / (status) and GET /search?q=... (hybrid, k=10) over HTTP, first byte to last;
- direct: the work alone, in this process (kb.app.status.status; kb.search.query.search), so the
page's
  own cost is the ratio page / direct;
- browser: headless Chromium (Debian's /usr/bin/chromium, through Playwright) loading each page,
  navigation start to the load event (skipped with --no-browser or without Chromium).

Target (issue 16): status and search render in under a second. Medians and p95 in ms; the CPU
class is printed first. With --json the last line is one object: {"notes", "chunks",
"status_server_ms", "search_server_ms", "status_browser_ms", "search_browser_ms", ...}.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import uvicorn

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import STOPS, bench_settings, cpu_name, describe, embedder, format_table
from kb.app import status
from kb.app.backend import Backend, embed_client, open_store
from kb.app.ingest import run
from kb.search import query as search
from notes_server import app as mcp_server

# server.py and its siblings (not a package), first: this file's own name is theirs too
sys.modules.pop("dashboard", None)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]  # fmt: skip
TAGS = [f"topic-{i:02d}" for i in range(24)]
VOCABULARY = (
    "river mountain kimchi bread flour pressure boundary layer engine garden tomato sailing hut "
    "ferment oven wing shock wave python server token cache index vector note"
)
WORDS = VOCABULARY.split()
QUERIES = ["how do I ferment cabbage", "boundary layer pressure", "sailing in strong wind",
           "python server cache", "garden tomatoes in summer"]  # fmt: skip


def write_notes(folder: Path, count: int, rng: random.Random) -> None:
    for i in range(count):
        tags = ", ".join(rng.sample(TAGS, 2))
        paragraphs = [" ".join(rng.choices(WORDS, k=40)) + "." for _ in range(3)]
        body = "\n\n".join(paragraphs)
        path = folder / f"area-{i % 20:02d}" / f"note-{i:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\ntags: [{tags}]\n---\n# Note {i}\n\n{body}\n", encoding="utf-8")


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    """Milliseconds of each of `repeat` calls (after one warm-up call)."""
    fn()
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def stats(ms: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(ms)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def browser_times(base: str, repeat: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    measure = "() => { const n = performance.getEntriesByType('navigation')[0];" \
              " return n.loadEventEnd - n.startTime; }"  # fmt: skip
    out: dict[str, list[float]] = {"status": [], "search": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        page = browser.new_page()
        for i in range(repeat + 1):
            for name, path in (("status", "/"), ("search", f"/search?q={QUERIES[i % 5]}")):
                page.goto(base + path, wait_until="load")
                if i:  # the first round warms up
                    out[name].append(page.evaluate(measure))
        browser.close()
    return out


def serve(backend: Backend, port: int) -> uvicorn.Server:
    config = uvicorn.Config(mcp_server.build_app(backend), host="127.0.0.1", port=port,
                            log_level="warning", ws="none")  # fmt: skip
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.02)
    return server


def measure(args: argparse.Namespace) -> dict[str, float | int | str | None]:
    rng = random.Random(16)
    with tempfile.TemporaryDirectory(prefix="kb-bench-dashboard-") as tmp, embedder() as url:
        root = Path(tmp)
        notes = root / "inbox"
        write_notes(notes, args.notes, rng)
        port = _port()
        settings = bench_settings(notes, root / "qdrant", url, MCP_PORT=port, LOG_LEVEL="WARNING")
        started = time.perf_counter()
        with open_store(settings) as store, embed_client(settings) as client:
            summary = run(settings, client, store)
        ingest_s = time.perf_counter() - started
        print(f"ingested {len(summary.ingested)} notes ({summary.chunks} chunks) in "
              f"{ingest_s:.1f}s", file=sys.stderr)  # fmt: skip
        backend = Backend(settings)
        server = serve(backend, port)
        base = f"http://127.0.0.1:{port}"
        try:
            store = backend.store()
            with httpx.Client(base_url=base, timeout=60) as http:
                queries = iter(QUERIES * (args.repeat + 1))
                times = {
                    "status page": timed(lambda: http.get("/").raise_for_status(), args.repeat),
                    "status direct": timed(lambda: status.status(settings, store), args.repeat),
                    "search page": timed(
                        lambda: http.get("/search", params={"q": next(queries)}).raise_for_status(),
                        args.repeat,
                    ),
                    "search direct": timed(
                        lambda: search.search(store, backend.client, next(queries), 10),
                        args.repeat,
                    ),
                }
            browser = None
            if not args.no_browser and CHROMIUM.is_file():
                browser = browser_times(base, args.repeat)
                times["status browser"] = browser["status"]
                times["search browser"] = browser["search"]
        finally:
            server.should_exit = True
            backend.close()
    rows = [(name, f"{stats(ms)[0]:.0f}", f"{stats(ms)[1]:.0f}") for name, ms in times.items()]
    print(format_table(["measure", "median ms", "p95 ms"], rows))
    for page in ("status", "search"):
        ratio = stats(times[f"{page} page"])[0] / max(stats(times[f"{page} direct"])[0], 1e-6)
        print(f"{page}: page / direct work = {ratio:.2f}x")
    if browser is None:
        print("browser: skipped (--no-browser, or no /usr/bin/chromium: make chromium)")

    def median(name: str) -> float | None:
        return round(stats(times[name])[0], 1) if name in times else None

    return {
        "notes": len(summary.ingested),
        "chunks": summary.chunks,
        "cpu": cpu_name(),
        "status_server_ms": median("status page"),
        "search_server_ms": median("search page"),
        "status_direct_ms": median("status direct"),
        "search_direct_ms": median("search direct"),
        "status_browser_ms": median("status browser"),
        "search_browser_ms": median("search browser"),
    }


def _port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=None, help="notes to generate (1000)")
    parser.add_argument("--quick", action="store_true", help="100 notes, 5 repeats")
    parser.add_argument("--repeat", type=int, default=None, help="timed calls per measure (10)")
    parser.add_argument("--no-browser", action="store_true", help="server times only")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    args.notes = args.notes or (100 if args.quick else 1000)
    args.repeat = args.repeat or (5 if args.quick else 10)
    if args.notes < 1 or args.repeat < 1:
        parser.error("--notes and --repeat must be 1 or more")
    print(f"CPU: {cpu_name()}")
    try:
        result = measure(args)
    except STOPS as exc:
        print(f"error: {describe(exc)}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
