"""Where settings come from: the environment beats `.env`, which beats the defaults, for the
scripts and MCP server (kb/core/settings.py) and for the embedder (embedder/config.py) alike."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from stack_files import embedder_settings_class

from kb.core import settings as kb_settings
from kb.core.settings import (
    DEFAULT_STORAGE,
    ENV_FILE_VARIABLE,
    REPO_ROOT,
    Settings,
    get_settings,
)
from kb.sources import registry


@pytest.fixture
def env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A `.env` that settings built in this test read (SETTINGS_ENV_FILE names it)."""
    path = tmp_path / ".env"
    path.write_text("")
    monkeypatch.setenv(ENV_FILE_VARIABLE, str(path))
    get_settings.cache_clear()
    yield path
    get_settings.cache_clear()


def test_environment_beats_env_file_which_beats_the_defaults(
    env_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file.write_text("COLLECTION=from_env_file\nEMBED_BATCH_SIZE=7\n")
    monkeypatch.setenv("COLLECTION", "from_environment")
    for settings in (Settings(), get_settings()):
        assert settings.COLLECTION == "from_environment"
        assert settings.EMBED_BATCH_SIZE == 7
        assert settings.EMBED_RETRIES == 5  # the default
    # an env file given explicitly, or none, still wins over SETTINGS_ENV_FILE
    assert Settings(_env_file=None).EMBED_BATCH_SIZE == 16


def test_embedder_settings_follow_the_same_order(
    env_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder_settings = embedder_settings_class()
    env_file.write_text("EMBED_MAX_INPUTS=3\nEMBED_QUEUE_SIZE=5\n")
    monkeypatch.setenv("EMBED_MAX_INPUTS", "4")
    settings = embedder_settings()
    assert settings.EMBED_MAX_INPUTS == 4
    assert settings.EMBED_QUEUE_SIZE == 5
    assert settings.EMBED_MAX_BODY_BYTES == 8 * 1024 * 1024  # the default
    assert embedder_settings(_env_file=None).EMBED_QUEUE_SIZE == 32


def test_the_env_file_is_the_repositorys_unless_settings_env_file_names_another(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    embedder_config = sys.modules[embedder_settings_class().__module__]
    monkeypatch.delenv(ENV_FILE_VARIABLE)
    for module in (kb_settings, embedder_config):
        assert module.env_file() == kb_settings.REPO_ROOT / ".env"
    monkeypatch.setenv(ENV_FILE_VARIABLE, str(tmp_path / "other.env"))
    for module in (kb_settings, embedder_config):
        assert module.env_file() == tmp_path / "other.env"


def test_the_suite_sees_no_setting_from_the_shell_or_the_repositorys_env_file() -> None:
    # conftest's controlled_settings: what every test and every process it starts inherits
    leaked = set(registry.fields()) & set(os.environ)
    assert not leaked, f"settings from the shell reach the tests: {sorted(leaked)}"
    assert Path(os.environ[ENV_FILE_VARIABLE]).read_text() == ""
    assert get_settings() == Settings(_env_file=None)


def test_log_level_is_read_in_any_case_by_the_scripts_and_the_embedder_alike() -> None:
    embedder = embedder_settings_class()
    for given, level in (("info", "INFO"), ("Warning", "WARNING"), (" debug ", "DEBUG")):
        read = Settings(_env_file=None, LOG_LEVEL=given), embedder(_env_file=None, LOG_LEVEL=given)
        assert [s.LOG_LEVEL for s in read] == [level, level]


REFUSED_LEVEL = "LOG_LEVEL: 'verbose' is not a logging level (one of DEBUG, INFO, WARNING"


@pytest.mark.parametrize(
    ("script", "args", "say"),
    [
        ("ingest.py", [], "error: "),
        ("mcp/server.py", [], "error: "),
        ("embedder/app.py", [], "error: embedder settings: "),
    ],
)
def test_an_unknown_log_level_stops_each_process_with_one_error_line_naming_it(
    script: str, args: list[str], say: str, tmp_path: Path
) -> None:
    env = {**os.environ, "LOG_LEVEL": "verbose", "NOTES_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(kb_settings.REPO_ROOT / script), *args],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line == f"{say}{REFUSED_LEVEL}, ERROR, CRITICAL)"


def test_ingest_runs_at_a_log_level_written_in_lower_case(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "LOG_LEVEL": "info",
        "NOTES_DIR": str(tmp_path / "data"),
        "STATE_DIR": str(tmp_path / "state"),
        "QDRANT_PATH": str(tmp_path / "qdrant"),
        "EMBED_URL": "http://127.0.0.1:9",  # nothing listens: the run gets that far, no further
        "EMBED_RETRIES": "0",
    }
    (tmp_path / "data").mkdir()
    done = subprocess.run(
        [sys.executable, str(kb_settings.REPO_ROOT / "ingest.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in done.stderr and done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert "indexing everything" in lines[0]  # an INFO line: the level took effect
    assert lines[-1].startswith("error: embedder at http://127.0.0.1:9 unreachable")


def test_storage_is_embedded_qdrant_data_unless_a_server_is_named(tmp_path: Path) -> None:
    # the shell's QDRANT_* are gone (controlled_settings). One default for every entry point:
    # what `make local`'s server opens, the scripts open too
    default = Settings(_env_file=None).QDRANT_PATH
    assert default == str(REPO_ROOT / DEFAULT_STORAGE)
    # `make up`'s users: QDRANT_URL, or the Qdrant key `make keys` wrote (only a server has one)
    assert Settings(_env_file=None, QDRANT_URL="http://localhost:6333").QDRANT_PATH == ""
    env_file = tmp_path / ".env"
    env_file.write_text("QDRANT_API_KEY=a-key\n")
    assert Settings(_env_file=env_file).QDRANT_PATH == ""
    # a folder named beats a key left over from `make up`
    named = Settings(_env_file=env_file, QDRANT_PATH=str(tmp_path / "q")).QDRANT_PATH
    assert named == str(tmp_path / "q")
