"""bench/cold_query.py, bench/mcp_search.py and bench/query_start.py run end to end on a few
hundred synthetic chunks with the session's MiniLM embedder (the timings are not asserted: they
are what the benchmarks report)."""

import json
import os
import subprocess
import sys

from helpers import REPO_ROOT


def run_bench(script: str, embedder_url: str, *args: str) -> list[str]:
    env = {**os.environ, "EMBED_URL": embedder_url}
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / script), "--quick", "--json", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout.splitlines()


def test_cold_query_bench_times_query_py_beside_python_itself(embedder_url: str) -> None:
    out = run_bench("cold_query.py", embedder_url, "--runs", "1")
    assert out[0].startswith("CPU: ")
    assert any(line.startswith("query.py (cold process)") for line in out)
    figures = json.loads(out[-1])
    assert figures["chunks"] == 500 and figures["target_s"] == 1.5
    assert 0 < figures["python_pass_wall_s"] < figures["cold_query_wall_s"]


def test_mcp_search_bench_compares_search_notes_with_the_work_it_wraps(embedder_url: str) -> None:
    out = run_bench("mcp_search.py", embedder_url, "--queries", "3")
    assert any(line.startswith("search_notes over MCP, new queries") for line in out)
    figures = json.loads(out[-1])
    assert figures["ratio"] == figures["mcp_p50_ms"] / figures["direct_p50_ms"]
    assert figures["target_ratio"] == 1.3 and figures["mcp_cached_p50_ms"] > 0
    # one embedding; one batch, the backlinks (the missing code collection is not looked for
    # again within Store.missing_lately's time)
    assert (figures["embedder_round_trips"], figures["store_round_trips"]) == (1, 2)


def test_query_start_bench_times_a_search_through_the_server_beside_uv_run_python(
    embedder_url: str,
) -> None:
    out = run_bench("query_start.py", embedder_url, "--runs", "1")
    assert out[0].startswith("CPU: ")
    assert any(line.startswith("uv run query.py (through the server)") for line in out)
    figures = json.loads(out[-1])
    assert figures["chunks"] == 300 and figures["target_s"] == 1.0
    assert figures["difference_s"] == figures["query_wall_s"] - figures["python_pass_wall_s"]
