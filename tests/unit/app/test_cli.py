"""Every host script meets errors the same way (kb.app.cli): one `error:` line naming the setting
or what failed, exit 2 for invalid settings, 1 for a failure the user can fix."""

import os
import subprocess
import sys

import pytest
from helpers import REPO_ROOT

from kb.core.settings import Settings

SCRIPTS = [
    ["ingest.py"],
    ["query.py", "kimchi"],
    ["smoke.py", "--wait", "0"],
    ["ingest_check.py"],
    ["embed_client.py", "some text"],
    ["mcp/check.py"],
]


def run(script: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in Settings.model_fields}
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / script[0]), *script[1:]],
        env=clean | {"PYTHONPATH": str(REPO_ROOT)} | env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s[0])
def test_an_invalid_setting_exits_2_with_one_error_line_naming_it(script: list[str]):
    result = run(script, EMBED_BATCH_SIZE="zero", MCP_PORT="70000")
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and "EMBED_BATCH_SIZE" in line and "MCP_PORT" in line
