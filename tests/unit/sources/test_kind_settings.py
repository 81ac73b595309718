"""Each kind of source declares its own settings (Kind.settings_model, kb.core.settings'
KindSettings): read from the same variables and the same `.env` as Settings, handed the values
Settings was given, and checked when the MCP server and ingest.py start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT, free_port
from mcp_fixtures import SERVER_SCRIPT, server_env

from kb.core.errors import ConfigError
from kb.core.settings import ENV_FILE_VARIABLE, Settings
from kb.sources import registry
from kb.sources.mail import MailSettings
from kb.sources.web import WebSettings
from kb.sources.youtube import YoutubeSettings


def test_a_kinds_settings_come_from_the_env_file_settings_env_file_names_and_given_values_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = tmp_path / "my.env"
    env.write_text("MAIL=~/Takeout/All mail.mbox\nWEB_TIMEOUT=7\nYOUTUBE_PLAYLISTS=WL\n")
    monkeypatch.setenv(ENV_FILE_VARIABLE, str(env))
    settings = Settings(WEB_TIMEOUT=3)
    assert settings.of(MailSettings).MAIL == "~/Takeout/All mail.mbox"
    assert settings.of(WebSettings).WEB_TIMEOUT == 3  # given to Settings: wins over the file
    copied = settings.model_copy(update={"YOUTUBE_PLAYLISTS": "PLabc"})
    assert copied.of(YoutubeSettings).YOUTUBE_PLAYLISTS == "PLabc"
    assert settings.of(YoutubeSettings).YOUTUBE_PLAYLISTS == "WL"  # the original is unchanged
    assert Settings(_env_file=None).of(MailSettings).MAIL == ""  # no file: no file's values
    assert not hasattr(settings, "MAIL")  # no code but the kind's reads it
    cleared = registry.without_sources(settings, tmp_path)
    assert {"MAIL", "NOTION", "EVERNOTE", "BOOKMARKS", "YOUTUBE_PLAYLISTS"} <= set(
        registry.source_settings()
    )
    assert (
        cleared.of(MailSettings).MAIL == "" and cleared.of(YoutubeSettings).YOUTUBE_PLAYLISTS == ""
    )


def test_an_invalid_kind_setting_is_named_in_one_line_before_the_server_or_ingest_starts(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match=r"^WEB_TIMEOUT: Input should be greater than 0$"):
        registry.check(Settings(_env_file=None, WEB_TIMEOUT=0))
    env = server_env({
        "MCP_PORT": str(free_port()), "QDRANT_PATH": str(tmp_path / "q"),
        "STATE_DIR": str(tmp_path / "state"), "WEB_CONTENT_TYPES": "image/png",
    })  # fmt: skip
    for script in (str(SERVER_SCRIPT), "ingest.py"):
        done = subprocess.run(
            [sys.executable, script], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        lines = done.stderr.strip().splitlines()
        assert done.returncode != 0 and len(lines) == 1, done.stderr
        assert "WEB_CONTENT_TYPES: 'image/png' is not a type a page is read as" in lines[0]
        assert not (tmp_path / "q").exists()  # nothing ran
