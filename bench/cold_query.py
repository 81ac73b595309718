"""A cold `query.py` (a fresh process, as a user types it) on 10,000 chunks in embedded storage,
side by side with `python -c pass` and `python -c "import query"` in the same run.

    uv run bench/cold_query.py            # 10,000 chunks, 7 runs each
    uv run bench/cold_query.py --quick    # 500 chunks, 3 runs each
    uv run bench/cold_query.py --json     # ... and the figures as JSON, last

The collection is synthetic (bench/scale.py's chunks at the embedder's dimension, under its model
name) and left as ingest.py leaves it (kb.store.optimize); the query is embedded by a real embedder
(EMBED_URL, or MiniLM started here). Each timed process runs with a bytecode cache of its own
(PYTHONPYCACHEPREFIX, filled by one untimed run first), as on a user's machine from the second
run on; the first row runs without one (PYTHONDONTWRITEBYTECODE=1: every module compiled).
Wall time and CPU time (user + system) are both given: on a shared machine the wall time
includes waiting for a CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import REPO_ROOT, cpu_name, embedder, format_table
from bench.scale import corpus
from kb.embedding.client import EmbedClient
from kb.store import collection, optimize
from kb.store.points import Store

TARGET_S = 1.5
COLLECTION = "bench"
QUERY = "how does a shock wave form on a swept wing?"


def build(folder: Path, url: str, n: int) -> None:
    """n synthetic chunks under the embedder's model name, as ingest.py leaves them."""
    with EmbedClient(url) as client:
        model, dims = client.model, client.dimensions
    with Store.open(COLLECTION, path=folder) as store:
        collection.create(store, model, dims)
        for batch in corpus(n, [], dims=dims):
            store.replace(batch, [])
        optimize.after_ingest(store, [COLLECTION], written=n)


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"error: {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="500 chunks, 3 runs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON, last")
    parser.add_argument("--chunks", type=int, default=10_000, help="chunks stored (10000)")
    parser.add_argument("--runs", type=int, help="processes timed per row (7; --quick 3)")
    args = parser.parse_args()
    n, runs = (500, 3) if args.quick else (args.chunks, 7)
    runs = args.runs or runs
    print(f"CPU: {cpu_name()}; load average {os.getloadavg()[0]:.1f}")
    with embedder() as url, tempfile.TemporaryDirectory(prefix="kb-cold-") as tmp:
        folder = Path(tmp) / "qdrant"
        started = time.perf_counter()
        build(folder, url, n)
        print(f"{n:,} chunks stored and indexed in {time.perf_counter() - started:.0f}s")
        (Path(tmp) / "notes").mkdir()
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "QDRANT"))}
        env = {
            **base,
            "EMBED_URL": url,
            "QDRANT_PATH": str(folder),
            "COLLECTION": COLLECTION,
            "NOTES_DIR": str(Path(tmp) / "notes"),
            "STATE_DIR": str(Path(tmp) / "state"),
            "LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(REPO_ROOT),
        }
        cached = {**env, "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
        python = [sys.executable]
        query = [*python, str(REPO_ROOT / "query.py"), QUERY]
        timed(query, cached)  # fills the bytecode cache, as a user's first run does
        cases = [
            ("query.py, no bytecode cache", query, {**env, "PYTHONDONTWRITEBYTECODE": "1"}),
            ("python -c pass", [*python, "-c", "pass"], cached),
            ('python -c "import query"', [*python, "-c", "import query"], cached),
            ("query.py (cold process)", query, cached),
        ]
        found: dict[str, tuple[float, float]] = {}
        for name, command, case_env in cases:
            times = [timed(command, case_env) for _ in range(runs)]
            found[name] = (
                statistics.median(t[0] for t in times),
                statistics.median(t[1] for t in times),
            )
    rows = [[name, f"{wall:.2f}", f"{cpu:.2f}"] for name, (wall, cpu) in found.items()]
    print(format_table(["process", "wall s (median)", "CPU s (median)"], rows))
    wall, cpu = found["query.py (cold process)"]
    print(f"cold query.py on {n:,} chunks: {wall:.2f} s wall, {cpu:.2f} s CPU", end=" ")
    print(f"(target {TARGET_S} s)")
    if args.json:
        print(
            json.dumps(
                {
                    "chunks": n,
                    "cold_query_wall_s": wall,
                    "cold_query_cpu_s": cpu,
                    "python_pass_wall_s": found["python -c pass"][0],
                    "import_query_wall_s": found['python -c "import query"'][0],
                    "no_bytecode_cache_wall_s": found["query.py, no bytecode cache"][0],
                    "target_s": TARGET_S,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
