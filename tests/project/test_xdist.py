"""`make test` on two pytest-xdist workers: tests/markers.py's groups hold there (the slow tests
on one worker, one at a time and first; a module's tests on one worker), and a run that collects
nothing still exits 5, which `make test` reports as such."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from helpers import REPO_ROOT
from markers import ONE_AT_A_TIME_TESTS

PLUGINS_OFF = ["-p", "no:cacheprovider", "-p", "no:schemathesis"]
XDIST = ["-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder"]  # as the Makefile's `test`

FAKE_MODULE = """
import os
import pytest

def record(name):
    with open(os.environ["RUN_LOG"], "a") as log:
        log.write(f"{os.environ['PYTEST_XDIST_WORKER']} {__name__} {name}\\n")

@pytest.mark.slow
def test_slow():
    record("slow")

@pytest.mark.parametrize("n", range(6))
def test_quick(n):
    record(f"quick{n}")
"""


def run_pytest(folder: Path, *args: str, log: Path) -> subprocess.CompletedProcess[str]:
    """pytest in `folder` with only tests/markers.py of the suite's plugins (seconds, not the
    conftest's imports), pytest-randomly shuffling as in `make test`."""
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT / "tests"), "RUN_LOG": str(log)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "markers", *PLUGINS_OFF, *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_two_workers_run_the_slow_tests_on_one_of_them_first_and_each_module_on_one(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow\n    unit\n    process\n")
    for i in range(4):
        (folder / f"test_m{i}.py").write_text(FAKE_MODULE)
    log = tmp_path / "run.log"
    run = run_pytest(folder, *XDIST, "--strict-markers", "-q", log=log)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]

    by_worker: dict[str, list[str]] = defaultdict(list)
    modules: dict[str, set[str]] = defaultdict(set)
    for line in log.read_text().splitlines():
        worker, module, name = line.split()
        by_worker[worker].append(name)
        if name != "slow":
            modules[module].add(worker)
    assert len(by_worker) == 2, by_worker  # both worked
    (slow_worker,) = [w for w, names in by_worker.items() if "slow" in names]
    assert by_worker[slow_worker][:4] == ["slow"] * 4  # all four, one after another, first
    assert all(len(workers) == 1 for workers in modules.values()), modules


def test_a_run_on_two_workers_that_collects_nothing_exits_5(tmp_path: Path) -> None:
    (tmp_path / "test_empty.py").write_text("")
    run = run_pytest(tmp_path, *XDIST, log=tmp_path / "run.log")
    assert run.returncode == 5, run.stdout[-3000:] + run.stderr[-2000:]


def test_each_test_held_apart_from_the_other_worker_still_exists() -> None:
    # a renamed test would silently leave its group
    for prefix in ONE_AT_A_TIME_TESTS:
        path, _, name = prefix.partition("::")
        text = (REPO_ROOT / path).read_text(encoding="utf-8")
        assert f"def {name}" in text if name else "def test_" in text, prefix
