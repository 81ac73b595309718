"""Qdrant keys and least privilege, statically (no Docker engine here): compose starts Qdrant with
a read-write and a read-only key from .env and gives the MCP server the read-only one; `make up`
first runs `kb/app/keys.py`, which creates strong keys once, keeps existing ones and never prints
them. The step runs for real, with the system's python3 as `make` runs it, on temporary files."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from stack_files import REPO_ROOT, load_compose

KEYS_SCRIPT = REPO_ROOT / "kb" / "app" / "keys.py"
REQUIRED = re.compile(r"\$\{([A-Z_]+):\?[^}]+\}")


def _required_variable(value: str) -> str:
    m = REQUIRED.fullmatch(value)
    assert m, f"{value!r} is not a required ${{NAME:?message}} reference"
    return m.group(1)


def _run(env_file: Path, **env: str) -> str:
    python = shutil.which("python3")
    assert python, "python3 is not on PATH"
    done = subprocess.run(
        [python, str(KEYS_SCRIPT), str(env_file)],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout + done.stderr


def _values(env_file: Path) -> dict[str, str]:
    return dict(
        line.split("=", 1)
        for line in env_file.read_text().splitlines()
        if "=" in line and line[0] != "#"
    )


def test_qdrant_requires_a_read_write_and_a_read_only_key_from_env() -> None:
    env = load_compose()["services"]["qdrant"]["environment"]
    assert _required_variable(env["QDRANT__SERVICE__API_KEY"]) == "QDRANT_API_KEY"
    assert (
        _required_variable(env["QDRANT__SERVICE__READ_ONLY_API_KEY"]) == "QDRANT_READ_ONLY_API_KEY"
    )


def test_the_mcp_server_gets_the_key_the_step_derives_not_the_read_write_one() -> None:
    env = load_compose()["services"]["mcp"]["environment"]
    assert _required_variable(env["QDRANT_API_KEY"]) == "MCP_QDRANT_API_KEY"


def test_make_up_runs_the_key_step_first() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^up: keys\b", makefile, re.M)
    recipe = re.search(r"^keys:.*\n\t(.+)$", makefile, re.M)
    assert recipe and recipe.group(1).strip() == "python3 kb/app/keys.py"


def test_the_step_creates_strong_distinct_keys_once_and_never_prints_them(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("# mine\nCOLLECTION=journal\n")
    printed = _run(env_file)
    values = _values(env_file)
    rw, ro = values["QDRANT_API_KEY"], values["QDRANT_READ_ONLY_API_KEY"]
    assert len(rw) >= 43 and len(ro) >= 43 and rw != ro  # 256 random bits each
    assert values["MCP_QDRANT_API_KEY"] == ro  # least privilege by default
    assert values["COLLECTION"] == "journal" and env_file.read_text().startswith("# mine\n")
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert rw not in printed and ro not in printed and "QDRANT_API_KEY" in printed

    before = env_file.read_text()
    again = _run(env_file)
    assert env_file.read_text() == before and "kept" in again


def test_a_missing_env_starts_from_the_template_and_a_copy_first_keeps_every_line(
    tmp_path: Path,
) -> None:
    shutil.copy(REPO_ROOT / ".env.example", tmp_path / ".env.example")
    template = (tmp_path / ".env.example").read_text().splitlines()
    env_file = tmp_path / ".env"
    _run(env_file)  # `make up` on a fresh clone: .env is the template, with the keys
    assert env_file.read_text().splitlines()[: len(template)] == template
    assert _values(env_file)["QDRANT_API_KEY"]
    # README's order: the copy first, settings set, then `make up`: every line is kept
    mine = [*template, "NOTE_FOLDERS=vault=~/Obsidian", "EMBED_MODEL=/models/minilm"]
    env_file.write_text("\n".join(mine) + "\n")
    _run(env_file)
    assert env_file.read_text().splitlines()[: len(mine)] == mine
    assert _values(env_file)["QDRANT_READ_ONLY_API_KEY"]


def test_the_step_keeps_existing_keys_and_fills_only_a_missing_one(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("QDRANT_API_KEY=my-own-read-write-key\nQDRANT_READ_ONLY_API_KEY=\n")
    _run(env_file)
    values = _values(env_file)
    assert values["QDRANT_API_KEY"] == "my-own-read-write-key"
    assert len(values["QDRANT_READ_ONLY_API_KEY"]) >= 43
    assert env_file.read_text().count("QDRANT_READ_ONLY_API_KEY=") == 1


@pytest.mark.parametrize("where", ["env file", "environment"])
def test_write_tools_give_the_mcp_server_the_read_write_key(tmp_path: Path, where: str) -> None:
    env_file = tmp_path / ".env"
    _run(env_file)
    assert _values(env_file)["MCP_QDRANT_API_KEY"] == _values(env_file)["QDRANT_READ_ONLY_API_KEY"]
    if where == "env file":
        env_file.write_text(env_file.read_text() + "MCP_WRITE_TOOLS=true\n")
        _run(env_file)
    else:
        _run(env_file, MCP_WRITE_TOOLS="true")
    values = _values(env_file)
    assert values["MCP_QDRANT_API_KEY"] == values["QDRANT_API_KEY"]
