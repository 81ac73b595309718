"""Every pytest run loads the fixture plugins tests/conftest.py registers, however small the file
it runs: they import the heavy libraries (the MCP SDK, uvicorn, kb.app's ingest with its web and
PDF stack, fpdf, torch) only inside the fixtures and helpers that use them, so one file's run
starts in seconds."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import REPO_ROOT

HEAVY = [
    "mcp",
    "uvicorn",
    "fpdf",
    "docx",
    "torch",
    "notes_server",
    "kb.app.ingest",
    "rapidocr",
    "cv2",
]
# a fresh interpreter: this one has imported everything the suite ran so far
PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import conftest
for name in conftest.pytest_plugins:
    __import__(name)
print(json.dumps(sorted(set(sys.argv[2:]) & set(sys.modules))))
"""


def test_the_fixture_plugins_load_without_the_heavy_libraries() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO_ROOT / "tests"), *HEAVY],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
