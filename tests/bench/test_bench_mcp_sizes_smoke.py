"""bench/mcp_sizes.py runs end to end on the test vault with the session's MiniLM embedder (the
sizes are held to their budgets in test_mcp_budget.py and test_mcp_server.py, not here)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO_ROOT


def test_mcp_sizes_bench_measures_tools_list_and_search_notes(
    embedder_url: str, tmp_path: Path
) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"query": "project alpha decision"}\n{"query": "sleep"}\n')
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "mcp_sizes.py"), "--json",
         "--notes", str(REPO_ROOT / "tests" / "obsidian_vault"), "--queries", str(queries)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "EMBED_URL": embedder_url},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    out = done.stdout.splitlines()
    assert out[0].startswith("CPU: ") and any(
        line.startswith("tools/list, 9 tools") for line in out
    )
    figures = json.loads(out[-1])
    assert figures["tools"] == 9 and figures["output_schemas"] == 9 * len("{}")
    assert len(figures["search_k_default"]) == len(figures["search_k_20"]) == 2
    assert 0 < sum(figures["search_k_default"]) <= sum(figures["search_k_20"])
