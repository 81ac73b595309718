"""smoke.py as users run it: a subprocess against a real embedder, and against a dead port."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import REPO_ROOT, free_port


def run_smoke(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EMBED_URL": url}
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "smoke.py"), *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_smoke_passes_against_a_running_embedder(embedder_url: str) -> None:
    result = run_smoke(embedder_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["smoke ok", "client ok"]


def test_smoke_fails_with_one_error_line_when_the_embedder_is_down() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = run_smoke(url, "--wait", "0")
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: embedder at {url} not ready after 0s: ")
    assert "unreachable" in lines[0]
    assert "EMBED_URL" in lines[0]


def test_smoke_says_once_on_stderr_what_it_waits_for_while_the_embedder_is_down() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = run_smoke(url, "--wait", "1")
    assert (result.returncode, result.stdout) == (1, "")
    waiting, error = result.stderr.strip().splitlines()
    assert waiting == f"waiting for the embedder at {url} (up to 1s)..."
    assert error.startswith(f"error: embedder at {url} not ready after 1s: ")


def test_smoke_prints_nothing_on_stderr_when_the_embedder_is_up(embedder_url: str) -> None:
    result = run_smoke(embedder_url)
    assert (result.returncode, result.stderr) == (0, "")
