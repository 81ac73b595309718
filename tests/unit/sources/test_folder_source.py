"""NOTE_FOLDERS: the settings check and a folder's listing (gates, git), without an embedder."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import REPO_ROOT
from ingest_fixtures import make_settings, run_script, script_env, write

from kb.core.errors import ConfigError
from kb.sources.files import EDITOR, HIDDEN, UNTRACKED
from kb.sources.folder import FolderSource, folders
from kb.sources.inbox import InboxSource


def sources(folder: FolderSource) -> list[str]:
    return sorted(item.source for item in folder.listing(everything=True).items)


def test_each_gate_skips_files_by_reason_and_notes_are_named_by_folder_and_path(tmp_path: Path):
    root = tmp_path / "vault"
    for name in ("a.md", "sub/b.txt", "sub/deep/c.MD"):
        write(root / name, "a note")
    for name in (".hidden.md", ".obsidian/workspace.md", ".trash/old.md", "sub/.#b.txt"):
        write(root / name, "hidden")
    for name in ("a.md.swp", "a.md~", "a.md.save", "b.tmp", "c.md.part"):
        write(root / name, "editor")
    write(root / "picture.png", b"\x89PNG")
    listing = FolderSource("vault", root).listing(everything=True)
    assert sorted(i.source for i in listing.items) == [
        "vault/a.md",
        "vault/sub/b.txt",
        "vault/sub/deep/c.MD",
    ]
    assert all(not i.pending for i in listing.items)  # never moved
    assert listing.ignored == ["vault/picture.png"]
    assert listing.skipped == {HIDDEN: 4, EDITOR: 5}
    assert listing.failed == []


def test_after_store_does_nothing_to_the_files(tmp_path: Path):
    folder = FolderSource("vault", tmp_path)
    write(tmp_path / "a.md", "a note")
    items = folder.listing(everything=True).items
    assert folder.after_store(items) == [None]
    assert [p.name for p in tmp_path.iterdir()] == ["a.md"]


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_a_git_work_tree_lists_only_what_git_would_track_unless_turned_off(tmp_path: Path):
    root = tmp_path / "handbook"
    write(root / ".gitignore", "build/\n*.draft.md\n")
    write(root / "guide.md", "tracked")
    write(root / "new.md", "untracked, not ignored")
    write(root / "build" / "out.md", "ignored folder")
    write(root / "idea.draft.md", "ignored file")
    write(root / "sub" / ".gitignore", "private.md\n")
    write(root / "sub" / "private.md", "ignored by a nested .gitignore")
    write(root / "sub" / "public.md", "kept")
    git(root, "init", "-q")
    git(root, "add", "guide.md")
    tracked = FolderSource("hb", root).listing(everything=True)
    assert sorted(i.source for i in tracked.items) == [
        "hb/guide.md",
        "hb/new.md",
        "hb/sub/public.md",
    ]
    assert tracked.skipped[UNTRACKED] == 3  # build/ (not walked), idea.draft.md, private.md
    folder = FolderSource("hb", root)
    folder.listing(everything=True)
    assert folder.holds("hb/guide.md") and not folder.holds("hb/idea.draft.md")  # ignored: gone
    assert sources(FolderSource("hb", root, git=False)) == [
        "hb/build/out.md",
        "hb/guide.md",
        "hb/idea.draft.md",
        "hb/new.md",
        "hb/sub/private.md",
        "hb/sub/public.md",
    ]


def test_folders_are_named_by_their_own_name_and_relative_paths_resolve_at_the_repository_root(
    tmp_path: Path,
):
    write(tmp_path / "Main" / "a.md", "a")
    settings = make_settings(tmp_path, NOTE_FOLDERS=f"{tmp_path / 'Main'}, repo-docs=docs")
    assert [(f.name, f.root) for f in folders(settings)] == [
        ("Main", tmp_path / "Main"),
        ("repo-docs", REPO_ROOT / "docs"),
    ]
    assert folders(make_settings(tmp_path)) == []


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("vault={tmp}/missing", "missing"),
        ("vault={tmp}/a.md", "a.md"),
        ("vault={tmp}/Main,vault={tmp}/Other", "'vault' is used twice"),
        ("ingested={tmp}/Main", "'ingested'"),
        ("inbox={tmp}/Main", "'inbox'"),
        ("trips={tmp}/Main", "trips exists in NOTES_DIR"),
        ("inside={tmp}/data/deep", "overlaps NOTES_DIR"),
        ("vault=", "names no folder"),
    ],
)
def test_a_bad_folder_setting_is_refused_naming_it(tmp_path: Path, value: str, named: str):
    for folder in ("Main", "Other", "data/trips", "data/deep"):
        (tmp_path / folder).mkdir(parents=True)
    write(tmp_path / "a.md", "a file, not a folder")
    settings = make_settings(tmp_path, NOTE_FOLDERS=value.format(tmp=tmp_path))
    with pytest.raises(ConfigError, match="NOTE_FOLDERS") as error:
        folders(settings)
    assert named in str(error.value)


def test_ingest_refuses_a_missing_folder_with_one_error_line_and_exit_2(tmp_path: Path):
    settings = make_settings(tmp_path)
    write(settings.NOTES_DIR / "waiting.md", "a note in the inbox")
    env = script_env(settings, NOTE_FOLDERS=f"vault={tmp_path / 'gone'}")
    done = run_script("ingest.py", env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: NOTE_FOLDERS: vault=") and str(tmp_path / "gone") in line
    assert (settings.NOTES_DIR / "waiting.md").exists()  # nothing was ingested or moved


def test_an_inbox_note_under_a_folder_name_is_refused_not_stored_over_the_folder(tmp_path: Path):
    write(tmp_path / "vault" / "a.md", "dropped into the inbox later")
    write(tmp_path / "b.md", "an inbox note")
    listing = InboxSource(tmp_path, reserved=["vault"]).listing(everything=False)
    assert [i.source for i in listing.items] == ["b.md"]
    [failure] = listing.failed
    assert failure.source == "vault/a.md" and "NOTE_FOLDERS name" in failure.reason
