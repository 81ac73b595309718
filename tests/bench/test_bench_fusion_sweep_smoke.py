"""bench/fusion_sweep.py on the notes corpus: every fusion family is replayed and ranked, and the
replay of the shipped formula agrees with hybrid search through Qdrant (or the run fails)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import REPO_ROOT

from bench import fusion_sweep as sweep

BENCH = REPO_ROOT / "bench"


def test_the_sweep_ranks_every_fusion_and_its_replay_matches_hybrid_search(embedder_url: str):
    proc = subprocess.run(
        [sys.executable, str(BENCH / "fusion_sweep.py"), "--only", "notes", "--json"],
        cwd=REPO_ROOT,
        env={**os.environ, "EMBED_URL": embedder_url},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result["margins"]) == {*sweep.families(), *sweep.MEASURED}
    table = result["ndcg@10"]
    assert set(table["hybrid search"]) == {"notes"}
    assert table["hybrid search"]["notes"] == table[sweep.SHIPPED]["notes"]
    # the references' margin against themselves is never positive, hybrid's is measured
    assert all(result["margins"][r]["worst"] <= 0 for r in sweep.REFERENCES)
    assert "worst margin" in proc.stdout
