"""bench/dashboard.py still runs end to end and prints its JSON (a few notes, server times only:
a smoke test, not a measurement; the numbers are only checked to be there)."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import REPO_ROOT
from mcp_fixtures import server_env


def test_dashboard_bench_times_the_status_and_search_pages(embedder_url: str) -> None:
    env = server_env({"EMBED_URL": embedder_url})
    proc = subprocess.run(
        [sys.executable, "bench/dashboard.py", "--notes", "12", "--repeat", "2", "--no-browser",
         "--json"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.startswith("CPU: ")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["notes"] == 12 and result["chunks"] >= 12
    assert result["status_server_ms"] > 0 and result["search_server_ms"] > 0
    assert result["status_browser_ms"] is None  # --no-browser
