"""Every benchmark runs as bench/README.md says, `uv run bench/NAME.py`, from a checkout where
bench/ is not an installed package: a script that imports `bench.` puts the checkout first."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _imports_bench_before_guard(path: Path) -> bool:
    """Whether the module imports `bench...` at top level before any `__package__` check."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and "__package__" in ast.unparse(node.test):
            return False
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "bench":
            return True
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "bench" for a in node.names
        ):
            return True
    return False


def test_every_bench_script_finds_the_bench_package_when_run_by_its_path():
    scripts = [p for p in sorted(BENCH.glob("*.py")) if '__name__ == "__main__"' in p.read_text()]
    assert scripts
    unguarded = [p.name for p in scripts if _imports_bench_before_guard(p)]
    assert unguarded == [], f"run as `uv run bench/NAME.py` these fail to import bench: {unguarded}"


def test_a_bench_script_run_by_its_path_from_another_folder_prints_its_help(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, str(BENCH / "big_vault.py"), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "--words-only" in done.stdout
