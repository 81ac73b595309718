"""bench/ingest.py on a tiny corpus, starting its own MiniLM embedder (EMBED_URL unset), so the
benchmark and its embedder start-up cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO_ROOT

KEYS = {"first_s", "reingest_s", "reingest_embed_calls", "edit_embedded_chunks"}


def test_ingest_bench_reports_first_ingest_reingests_one_edit_and_a_recreated_collection(
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    for i in range(5):
        path = docs / f"folder{i % 2}" / f"note{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {i}\n\nThe wind tunnel run number {i} measured the wake.\n")
    before = {p: p.read_bytes() for p in docs.rglob("*.md")}
    env = {k: v for k, v in os.environ.items() if k != "EMBED_URL"}

    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "ingest.py"), "--docs", str(docs), "--json"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {p: p.read_bytes() for p in docs.rglob("*.md")} == before  # copied, never moved
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result) >= KEYS
    assert result["first_chunks"] == 5 + result["long_note_chunks"]
    assert result["long_note_chunks"] == 20
    assert result["first_s"] > 0 and result["reingest_s"] > 0
    assert result["first_embed_calls"] >= 2  # 25 chunks in batches of EMBED_BATCH_SIZE=16
    # the embedding cache: unchanged text is never embedded again, an edit only its chunk
    assert result["reingest_embed_calls"] == 0
    assert result["redrop_embed_calls"] == 0
    assert result["edit_embedded_chunks"] == 1
    # a re-created collection takes every vector from the cache; without it, embeds them all
    assert result["recreate_embed_calls"] == 0
    assert result["recreate_nocache_embed_calls"] == result["first_embed_calls"]
    assert "re-ingest:" in proc.stdout
