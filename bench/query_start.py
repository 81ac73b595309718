"""A terminal search while `make local` runs: `uv run query.py` through the MCP server that holds
embedded storage (kb.app.notes chooses it from STATE_DIR/server.json), timed side by side with
`uv run python -c pass` in the same run, alternating, so both see the same machine load.

    uv run bench/query_start.py            # 2,000 chunks, 9 runs each
    uv run bench/query_start.py --quick    # 300 chunks, 3 runs each
    uv run bench/query_start.py --json     # ... and the figures as JSON, last

The target (issue 44): a search costs at most TARGET_S more than starting Python through uv.
The collection is synthetic (bench/cold_query.py's), its query embedded by a real embedder
(EMBED_URL, or MiniLM started here); the server is `python mcp/server.py`, as `make local` runs
it. Each process has a warm bytecode cache (one untimed run first), as on a user's machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.cold_query import COLLECTION, QUERY, build, timed
from bench.common import REPO_ROOT, cpu_name, embedder, format_table, free_port
from kb.app.process import Child

TARGET_S = 1.0  # a search's cost beyond `uv run python -c pass`
SERVER_START_S = 120.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="300 chunks, 3 runs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON, last")
    parser.add_argument("--runs", type=int, help="processes timed per row (9; --quick 3)")
    args = parser.parse_args()
    n, runs = (300, 3) if args.quick else (2_000, 9)
    runs = args.runs or runs
    print(f"CPU: {cpu_name()}; load average {os.getloadavg()[0]:.1f}")
    with embedder() as url, tempfile.TemporaryDirectory(prefix="kb-query-start-") as tmp:
        folder, state, notes = Path(tmp) / "qdrant", Path(tmp) / "state", Path(tmp) / "notes"
        build(folder, url, n)
        notes.mkdir()
        port = free_port()
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "QDRANT"))}
        env = {
            **base,
            "EMBED_URL": url,
            "QDRANT_PATH": str(folder),
            "COLLECTION": COLLECTION,
            "NOTES_DIR": str(notes),
            "STATE_DIR": str(state),
            "MCP_PORT": str(port),
            "MCP_WATCH": "false",
            "LOG_LEVEL": "WARNING",
            "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache"),
        }
        server_env = {**env, "LOG_LEVEL": "INFO"}  # its log counts the searches it answered
        argv = [sys.executable, str(REPO_ROOT / "mcp" / "server.py")]
        with Child("MCP server", argv, env=server_env, log=Path(tmp) / "server.log") as server:
            server.wait_ready(f"http://127.0.0.1:{port}/health", SERVER_START_S)
            uv = os.environ.get("UV", "uv")
            cases = {
                "uv run python -c pass": [uv, "run", "python", "-c", "pass"],
                "uv run query.py (through the server)": [uv, "run", "query.py", QUERY],
            }
            for command in cases.values():
                timed(command, env)  # fills the bytecode cache, as a user's first run does
            found: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
            for _ in range(runs):  # alternating: both rows see the same load
                for name, command in cases.items():
                    found[name].append(timed(command, env))
            searches = server.log_text().count("search_notes k=")
    if searches < runs:
        raise SystemExit(f"error: the server answered {searches} searches of {runs}")
    walls = {name: statistics.median(t[0] for t in times) for name, times in found.items()}
    cpus = {name: statistics.median(t[1] for t in times) for name, times in found.items()}
    rows = [[name, f"{walls[name]:.2f}", f"{min(t[0] for t in found[name]):.2f}",
             f"{cpus[name]:.2f}"] for name in found]  # fmt: skip
    print(format_table(["process", "wall s (median)", "wall s (best)", "CPU s (median)"], rows))
    bare, search = walls.values()
    bare_cpu, search_cpu = cpus.values()
    print(
        f"a terminal search through the MCP server: {search:.2f} s, {search - bare:.2f} s more "
        f"than uv run python -c pass ({search / bare:.1f}x; CPU {search_cpu - bare_cpu:.2f} s "
        f"more; target +{TARGET_S} s)"
    )
    if args.json:
        figures = {
            "chunks": n,
            "python_pass_wall_s": bare,
            "query_wall_s": search,
            "difference_s": search - bare,
            "difference_cpu_s": search_cpu - bare_cpu,
            "ratio": search / bare,
            "target_s": TARGET_S,
        }
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    sys.exit(code)
