"""Every place the project stores notes, vectors or state by default, or tells the user to use,
is kept out of git and out of the Docker build contexts: `git status` must never offer a user's
notes (embedded Qdrant holds the text of every chunk) for a commit."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from stack_files import CONFIG_DOC, ENV_EXAMPLE, REPO_ROOT, dockerignore_excludes

from kb.core.settings import DEFAULT_STORAGE, Settings
from kb.core.state import CACHE_NAME, LOCK_NAME, OLD_CACHE_NAME, OLD_LOCK_NAME, RUN_LOG_NAME

README = REPO_ROOT / "README.md"
# Folders the code creates that no setting names (yet): the lead's state folder for the ingest
# lock, the embed cache and run logs.
STATE_FOLDERS = ["state"]
# A path setting assigned in the docs: `QDRANT_PATH=qdrant_data`, `NOTES_DIR=notes` ...
ASSIGNED = re.compile(r"\b[A-Z][A-Z0-9_]*_(?:PATH|DIR)=([\w.][\w./-]*)")


def suggested_folders() -> set[str]:
    """Relative folders README, docs/guide/configuration.md and .env.example tell the user to
    set."""
    found = set()
    for doc in (README, CONFIG_DOC, ENV_EXAMPLE):
        for value in ASSIGNED.findall(doc.read_text(encoding="utf-8")):
            if not value.startswith(("/", "~")):
                found.add(value.rstrip("/"))
    return found


def default_folders() -> set[str]:
    """Folders inside the repository that path settings default to (NOTES_DIR = data ...)."""
    found = set()
    for info in Settings.model_fields.values():
        if isinstance(info.default, Path) and info.default.is_relative_to(REPO_ROOT):
            found.add(info.default.relative_to(REPO_ROOT).as_posix())
    return found


def stored_files() -> list[str]:
    """A file inside every storage or state location, as the code or the user would create it."""
    folders = suggested_folders() | default_folders() | set(STATE_FOLDERS) | {DEFAULT_STORAGE}
    files = [f"{folder}/sub/stored.file" for folder in sorted(folders)]
    state = Settings.model_fields["STATE_DIR"].default.relative_to(REPO_ROOT).as_posix()
    files += [f"{state}/{name}" for name in (CACHE_NAME, LOCK_NAME, RUN_LOG_NAME)]
    notes = Settings.model_fields["NOTES_DIR"].default.relative_to(REPO_ROOT).as_posix()
    files += [
        f"{notes}/recipes/kimchi.md",
        f"{notes}/ingested/recipes/kimchi.md",
        f"{notes}/{OLD_CACHE_NAME}",  # where versions before STATE_DIR kept them
        f"{notes}/{OLD_LOCK_NAME}",
        f"{notes}/qdrant_data/collection/notes/storage.sqlite",
        ".env",
    ]
    return files


def git_ignores(path: str) -> bool:
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "--quiet", path],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


def test_the_storage_folder_make_local_defaults_to_is_among_the_checked_locations() -> None:
    # README's "Without Docker" is `make local`: QDRANT_PATH defaults to qdrant_data there
    assert f"{DEFAULT_STORAGE}/sub/stored.file" in stored_files()


@pytest.mark.parametrize("path", stored_files())
def test_git_ignores_every_storage_and_state_location(path: str) -> None:
    assert git_ignores(path), f"{path} is not git-ignored: add its folder to .gitignore"


@pytest.mark.parametrize("path", stored_files())
def test_no_docker_build_context_takes_in_a_storage_or_state_location(path: str) -> None:
    assert dockerignore_excludes(REPO_ROOT / ".dockerignore", path), path


def test_the_kept_placeholders_of_the_notes_folder_stay_tracked() -> None:
    assert not git_ignores("data/.gitkeep")
    assert not git_ignores("data/ingested/.gitkeep")
