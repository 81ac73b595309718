"""The suite itself: a user's `.env` or shell settings cannot change its results, loading the
script folders (embedder/, mcp/, bench/) in-process leaves no module names behind, and a test
that starts processes is never marked `unit`."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import setting_names
from helpers import REPO_ROOT
from markers import calls_processes

from kb.core.settings import ENV_FILE_VARIABLE

# What a user may well have: README's own `echo "QDRANT_PATH=qdrant_data" >> .env`, then
# settings that would break tests which rely on the defaults.
HOSTILE_ENV_FILE = """\
QDRANT_PATH=qdrant_data
COLLECTION=hostile
EMBED_URL=http://127.0.0.1:9
EMBED_TIMEOUT=0.001
EMBED_BATCH_SIZE=1
EMBED_MAX_INPUTS=1
EMBED_MAX_TOKENS=16
EMBED_QUEUE_SIZE=1
EMBED_API_KEY=hostile
"""
# ... and exported in the shell that runs pytest.
HOSTILE_SHELL = {
    "QDRANT_URL": "http://127.0.0.1:9",
    "EMBED_MAX_BODY_BYTES": "1024",
    "NOTES_DIR": "/nonexistent/notes",
}
# Tests whose outcome those settings would change, one per reader of settings: a script
# (query.py), the embedder process (embedder/config.py), the embedder client in the test process.
REPRESENTATIVE = [
    "tests/unit/app/test_query.py::test_query_exits_with_one_error_line_when_qdrant_is_down",
    "tests/unit/embedder/test_embedder_api.py::test_too_many_inputs_get_413",
    "tests/unit/embedder/test_embedder_api.py::test_health_reports_model_dimensions_and_token_limit",
    "tests/unit/embedding/test_embed_client.py::test_documents_come_back_in_order_in_batches_of_batch_size",
]


def copy_checkout(dest: Path) -> Path:
    """The checkout's files as a clean clone with this working tree's changes would hold them
    (tracked, and untracked but not ignored: no .env, no notes, no virtual environment)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for relative in filter(None, listed.split("\0")):
        source = REPO_ROOT / relative
        if source.is_file():  # a tracked file deleted in the working tree is left out
            target = dest / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def shell_env(**extra: str) -> dict[str, str]:
    """This environment as a developer's shell would hold it: no suite redirection."""
    env = {k: v for k, v in os.environ.items() if k not in setting_names()}
    env.pop(ENV_FILE_VARIABLE, None)
    return env | extra


def test_a_hostile_env_file_and_shell_do_not_change_the_suites_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = copy_checkout(tmp_path / "checkout")
    (repo / ".env").write_text(HOSTILE_ENV_FILE)

    # Outside the suite the copy's .env is read: the scripts and the embedder see it.
    query = subprocess.run(
        [sys.executable, "query.py", "bread"],
        cwd=repo,
        env=shell_env(QDRANT_URL="http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert query.returncode == 2, query.stderr
    assert "set QDRANT_URL or QDRANT_PATH, not both" in query.stderr
    spec = importlib.util.spec_from_file_location(
        "hostile_config", repo / "embedder" / "embed_server" / "config.py"
    )
    assert spec is not None and spec.loader is not None
    config = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, config)  # pydantic resolves annotations there
    spec.loader.exec_module(config)
    monkeypatch.delenv(ENV_FILE_VARIABLE, raising=False)
    assert config.EmbedderSettings().EMBED_MAX_INPUTS == 1

    # The suite run from that copy, in that shell, passes all the same.
    pytest_argv = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    suite = subprocess.run(
        [sys.executable, *pytest_argv, *REPRESENTATIVE],
        cwd=repo,
        env=shell_env(**HOSTILE_SHELL),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert suite.returncode == 0, suite.stdout[-6000:] + suite.stderr[-3000:]
    assert f"{len(REPRESENTATIVE)} passed" in suite.stdout


def test_no_script_folder_is_left_on_sys_path_or_under_a_module_name() -> None:
    importlib.import_module("embed_server.api")
    importlib.import_module("notes_server.app")
    importlib.import_module("bench.retrieval")
    assert importlib.import_module("mcp").__file__ != str(REPO_ROOT / "mcp")  # the SDK's
    for folder in ("embedder", "mcp", "bench"):
        assert str(REPO_ROOT / folder) not in sys.path
        for script in (REPO_ROOT / folder).glob("*.py"):
            module = sys.modules.get(script.stem)
            assert module is None or getattr(module, "__file__", None) != str(script), script


FAKE_TESTS = """
import subprocess

def spawn():
    return subprocess.run(["true"], check=True)

def test_direct():
    subprocess.run(["true"], check=True)

def test_through_a_helper():
    spawn()

def test_in_a_lambda():
    run = lambda: spawn()
    run()

def test_pure():
    assert sorted([2, 1]) == [1, 2]
"""


def test_a_test_is_marked_process_when_it_or_a_helper_of_its_module_starts_one() -> None:
    module = types.ModuleType("fake_tests")
    exec(FAKE_TESTS, module.__dict__)
    marked = {
        name: calls_processes(getattr(module, name), module)
        for name in ("test_direct", "test_through_a_helper", "test_in_a_lambda", "test_pure")
    }
    assert marked == {
        "test_direct": True,
        "test_through_a_helper": True,
        "test_in_a_lambda": True,
        "test_pure": False,
    }
