"""bench/ stays out of the product's way: it is not installed (a folder of scripts of the
checkout), and no source file kept as benchmark data lies unpacked beside the product's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO_ROOT

FIND_BENCH = "import importlib.util, sys; sys.exit(importlib.util.find_spec('bench') is not None)"


def test_bench_is_not_importable_outside_the_checkout(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run(
        [sys.executable, "-c", FIND_BENCH], cwd=tmp_path, env=env, timeout=60, check=False
    )
    assert found.returncode == 0, "the installed project provides `bench`"


def test_no_python_source_lies_unpacked_among_the_datasets() -> None:
    # the code collection's frozen kb/ ships as kb.tar.gz (bench.common.documents unpacks it)
    assert sorted((REPO_ROOT / "bench" / "datasets").rglob("*.py")) == []
    assert (REPO_ROOT / "bench" / "datasets" / "code" / "kb.tar.gz").is_file()
