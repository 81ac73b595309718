"""bench/scale.py runs end to end on a few hundred synthetic chunks (the timings are not
asserted: they are what the benchmark reports)."""

import json
import subprocess
import sys

from helpers import REPO_ROOT


def test_scale_bench_measures_both_engines_side_by_side_and_ends_with_json() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "scale.py"), "--sizes", "300", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout.splitlines()
    rows = [line.split() for line in out if line.split()[:1] in (["local"], ["edge"])]
    assert [(r[0], r[1]) for r in rows] == [("local", "300"), ("edge", "300")]
    assert out[0].startswith("CPU: ")
    headline = json.loads(out[-1])
    assert set(headline) == {
        "edge_100k_grouped_p50_ms",
        "local_10k_grouped_p50_ms",
        "edge_10k_grouped_p50_ms",
    }
