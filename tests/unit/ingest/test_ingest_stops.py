"""A run that stops early (Ctrl-C, the embedder going away) keeps what it finished and loses
nothing: notes stored are moved, the rest stay in the inbox for the next run."""

import os
import signal
import subprocess
import sys
import threading

import pytest
from helpers import REPO_ROOT
from ingest_fixtures import check_consistent, make_settings, script_env, write

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.core.errors import IngestError
from kb.ingest.options import IngestOptions
from kb.ingest.progress import Progress

NOTES = {
    f"n{i:02d}.md": f"# Note {i}\n\nFact number {i}: the {i * 7}th river runs north.\n"
    for i in range(12)
}


def inbox(settings) -> set[str]:
    return {p.name for p in settings.NOTES_DIR.glob("*.md")}


class AfterFirstGroup(Progress):
    """Calls `action` once, when the first note is stored and moved."""

    def __init__(self, action) -> None:
        self.action, self.fired = action, False

    def done(self, source: str, chunks: int) -> None:
        if not self.fired:
            self.fired = True
            self.action()


def test_a_stop_request_ends_the_run_after_the_current_group_with_finished_notes_moved(
    tmp_path, embedder_url
):
    settings = make_settings(tmp_path, embedder_url, EMBED_BATCH_SIZE=2)
    for i, (name, text) in enumerate(NOTES.items()):  # n11.md edited last
        os.utime(write(settings.NOTES_DIR / name, text), (1_700_000_000 + i,) * 2)
    stop = threading.Event()
    with open_store(settings) as store, embed_client(settings) as client:
        with pytest.raises(IngestError, match=r"interrupted; 10 notes are left") as caught:
            run(
                settings,
                client,
                store,
                IngestOptions(progress=AfterFirstGroup(stop.set), stop=stop),
            )
        summary = caught.value.summary
        # exactly the group in flight: every note stored by its words first, then embedded
        # from the most recently edited
        assert sorted(summary.added) == ["n10.md", "n11.md"]
        assert inbox(settings) == set(NOTES) - set(summary.added)
        check_consistent(store, settings)
        left = inbox(settings)
        assert sorted(run(settings, client, store).added) == sorted(left)  # the next run resumes
    assert inbox(settings) == set()


def test_the_embedder_dying_mid_run_stops_it_with_finished_notes_moved_and_the_rest_kept(
    tmp_path, start_embedder, minilm_path
):
    dying = start_embedder({"EMBED_MODEL": str(minilm_path)})
    settings = make_settings(tmp_path, dying.url, EMBED_BATCH_SIZE=2)
    for name, text in NOTES.items():
        write(settings.NOTES_DIR / name, text)
    with open_store(settings) as store, embed_client(settings) as client:
        with pytest.raises(IngestError, match="unreachable") as caught:
            run(settings, client, store, IngestOptions(progress=AfterFirstGroup(dying.stop)))
        stored = caught.value.summary.added
        assert stored and len(stored) < len(NOTES)
        assert inbox(settings) == set(NOTES) - set(stored)
        check_consistent(store, settings)


def test_ctrl_c_during_ingest_py_prints_the_summary_and_one_error_line_and_exits_1(
    tmp_path, embedder_url
):
    settings = make_settings(tmp_path, embedder_url, EMBED_BATCH_SIZE=1)
    for name, text in NOTES.items():
        write(settings.NOTES_DIR / name, text)
    process = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "ingest.py")],
        env=script_env(settings, EMBED_BATCH_SIZE="1"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    first = process.stderr.readline()  # "ingesting 12 notes ...": the run is under way
    assert first.startswith("ingesting 12 notes"), first
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: interrupted; ") and last.endswith(" left for the next run")
    left = int(last.split("; ")[1].split()[0])
    assert 0 < left <= len(NOTES)
    assert len(inbox(settings)) == left  # what was stored was moved; nothing else was touched
    assert out.startswith("ingested ") or left == len(NOTES)
    with open_store(settings) as store:
        check_consistent(store, settings)


def test_inbox_folders_emptied_by_the_moves_are_removed_and_folders_holding_anything_stay(
    settings, client, store
):
    notes = settings.NOTES_DIR
    write(notes / "trips" / "japan.md", NOTES["n00.md"])
    write(notes / "deep" / "er" / "b.md", NOTES["n01.md"])
    write(notes / "keep" / "a.md", NOTES["n02.md"])
    write(notes / "keep" / ".DS_Store", "not a note, not ours")
    run(settings, client, store)
    assert not (notes / "trips").exists() and not (notes / "deep").exists()
    assert (notes / "keep" / ".DS_Store").read_text(encoding="utf-8") == "not a note, not ours"
    assert (notes / "ingested" / "deep" / "er" / "b.md").is_file()
