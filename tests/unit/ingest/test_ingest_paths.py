"""What ingest does with the paths in a notes folder beyond plain note files: hidden files and
folders, symlinked folders, broken symlinks, file names that are not UTF-8, and moving notes on a
filesystem without hard links. Real ingest, MiniLM embedder and embedded Qdrant."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from ingest_fixtures import BREAD, KIMCHI, SHOCK, check_consistent, tree_state, write

from kb.app.ingest import run
from kb.ingest.options import IngestOptions


def sources(store) -> set[str]:
    return {payload["source"] for _, payload in store.payloads()}


def test_hidden_files_and_folders_are_skipped_and_never_moved(settings, client, store):
    notes = settings.NOTES_DIR
    hidden = [
        ".obsidian/workspace.md",
        ".obsidian/plugins/sync/notes.md",
        ".trash/deleted.md",
        ".draft.md",
        "trips/.scratch.txt",
        "trips/.old/alps.md",
    ]
    for name in hidden:
        write(notes / name, SHOCK)
    write(notes / "trips" / "walk.md", KIMCHI)
    before = tree_state(notes)

    summary = run(settings, client, store)

    assert (summary.ingested, summary.failed, summary.ignored) == (["trips/walk.md"], [], [])
    after = tree_state(notes)
    for name in hidden:
        assert after[name] == before[name], f"{name} moved or altered"
        assert not (settings.NOTES_DIR / "ingested" / name).exists()
    assert sources(store) == {"trips/walk.md"}

    # Nor does a rebuild, which reads ingested/, pick hidden files up there.
    write(settings.NOTES_DIR / "ingested" / ".trash" / "old.md", BREAD)
    summary = run(settings, client, store, IngestOptions(rebuild=True))
    assert summary.failed == [] and sources(store) == {"trips/walk.md"}
    assert (settings.NOTES_DIR / "ingested" / ".trash" / "old.md").read_text(
        encoding="utf-8"
    ) == BREAD


def test_a_symlinked_folder_is_reported_and_neither_followed_nor_moved(
    tmp_path, settings, client, store
):
    notes = settings.NOTES_DIR
    outside = write(tmp_path / "elsewhere" / "secret.md", KIMCHI).parent
    write(notes / "real" / "bread.txt", BREAD)
    (notes / "linked").symlink_to(outside, target_is_directory=True)
    (notes / "alias").symlink_to(notes / "real", target_is_directory=True)
    outside_before = tree_state(outside)

    summary = run(settings, client, store)

    assert summary.ingested == ["real/bread.txt"]  # once, not again through the alias
    reasons = {f.source: f.reason for f in summary.failed}
    assert reasons == {
        "alias": "symlinked folder (not followed)",
        "linked": "symlinked folder (not followed)",
    }
    assert (notes / "linked").is_symlink() and (notes / "alias").is_symlink()
    assert tree_state(outside) == outside_before
    assert not (settings.NOTES_DIR / "ingested" / "linked").exists()
    assert sources(store) == {"real/bread.txt"}


def test_a_broken_symlink_is_reported_and_left_in_place(settings, client, store):
    notes = settings.NOTES_DIR
    write(notes / "bread.txt", BREAD)
    (notes / "gone.md").symlink_to(notes / "deleted-meanwhile.md")

    summary = run(settings, client, store)

    assert summary.ingested == ["bread.txt"]
    assert [(f.source, f.reason) for f in summary.failed] == [("gone.md", "broken symlink")]
    assert os.readlink(notes / "gone.md") == str(notes / "deleted-meanwhile.md")
    assert not os.path.lexists(settings.NOTES_DIR / "ingested" / "gone.md")


def test_a_file_name_that_is_not_utf8_is_reported_and_left_in_place(settings, client, store):
    notes = settings.NOTES_DIR
    write(notes / "bread.txt", BREAD)
    latin1 = os.fsencode(notes) + b"/caf\xe9.md"  # "café.md" written by a Latin-1 system
    with open(latin1, "wb") as note:
        note.write(KIMCHI.encode())

    summary = run(settings, client, store)

    assert summary.ingested == ["bread.txt"]
    [failure] = summary.failed
    assert failure.reason == "file name is not valid UTF-8; rename it"
    assert "caf" in failure.source and failure.source.isascii()  # printable as it is
    with open(latin1, "rb") as note:
        assert note.read() == KIMCHI.encode()
    assert os.listdir(os.fsencode(settings.NOTES_DIR / "ingested")) == [b"bread.txt"]
    assert sources(store) == {"bread.txt"}


def refuse_hard_links(monkeypatch: pytest.MonkeyPatch, before_refusing=None) -> list[Path]:
    """os.link fails as on a filesystem without hard links (EPERM, as on FAT or some network
    and FUSE filesystems); the destinations it was asked for are returned."""
    asked: list[Path] = []

    def link(src, dst, *args, **kwargs):
        asked.append(Path(dst))
        if before_refusing is not None:
            before_refusing(Path(dst))
        raise OSError(errno.EPERM, os.strerror(errno.EPERM), str(dst))

    monkeypatch.setattr(os, "link", link)
    return asked


def test_without_hard_links_notes_are_moved_by_rename(monkeypatch, settings, client, store):
    notes = settings.NOTES_DIR
    write(notes / "kimchi.md", KIMCHI)
    write(notes / "deep" / "er" / "bread.txt", BREAD)
    asked = refuse_hard_links(monkeypatch)

    summary = run(settings, client, store)

    assert sorted(summary.ingested) == ["deep/er/bread.txt", "kimchi.md"]
    assert summary.failed == []
    assert sorted(asked) == sorted(
        settings.NOTES_DIR / "ingested" / name for name in ["deep/er/bread.txt", "kimchi.md"]
    )  # the hard link was tried first, and the rename did the move
    for name, text in [("kimchi.md", KIMCHI), ("deep/er/bread.txt", BREAD)]:
        assert not (notes / name).exists()
        assert (settings.NOTES_DIR / "ingested" / name).read_text(encoding="utf-8") == text
    check_consistent(store, settings)


def test_without_hard_links_a_file_appearing_at_the_destination_is_never_overwritten(
    monkeypatch, settings, client, store
):
    notes = settings.NOTES_DIR
    write(notes / "kimchi.md", KIMCHI)

    def another_program_writes(dest: Path) -> None:
        dest.write_text("written by another program meanwhile\n")

    refuse_hard_links(monkeypatch, before_refusing=another_program_writes)

    summary = run(settings, client, store)

    assert summary.ingested == []
    [failure] = summary.failed
    assert failure.source == "kimchi.md" and failure.reason.startswith("stored, but not moved")
    assert (notes / "kimchi.md").read_text(encoding="utf-8") == KIMCHI  # still in the inbox
    assert (settings.NOTES_DIR / "ingested" / "kimchi.md").read_text() == (
        "written by another program meanwhile\n"
    )
