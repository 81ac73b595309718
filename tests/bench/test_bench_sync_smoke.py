"""bench/sync.py on a tiny folder against the session's MiniLM embedder, so the benchmark
cannot rot: its comparison, rename counting and watch timing run end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import REPO_ROOT

KEYS = {"orphans", "missing", "rename_embeds", "watch_p50_s"}


def test_sync_bench_reports_orphans_missing_rename_embeds_and_watch_latency(
    embedder_url: str,
) -> None:
    env = {**os.environ, "EMBED_URL": embedder_url}
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "sync.py"), "--notes", "12", "--ops", "10",
         "--rounds", "2", "--samples", "2", "--json"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result) >= KEYS
    assert result["orphans"] == 0 and result["missing"] == 0 and result["rename_embeds"] == 0
    assert 0 < result["watch_p50_s"] < 60
    assert "CPU:" in proc.stdout
