"""Where settings come from: the environment beats `.env`, which beats the defaults, for the
scripts and MCP server (kb/settings.py) and for the embedder (embedder/config.py) alike."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from stack_files import embedder_settings_class

from kb import settings as kb_settings
from kb.settings import ENV_FILE_VARIABLE, Settings, get_settings


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
    leaked = set(Settings.model_fields) & set(os.environ)
    assert not leaked, f"settings from the shell reach the tests: {sorted(leaked)}"
    assert Path(os.environ[ENV_FILE_VARIABLE]).read_text() == ""
    assert get_settings() == Settings(_env_file=None)
