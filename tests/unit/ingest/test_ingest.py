import io
import math
import os
import re
import signal
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from helpers import REPO_ROOT
from ingest_fixtures import (
    BREAD,
    KILLABLE_INGEST,
    KIMCHI,
    LOCK_HOLDER,
    SHOCK,
    UNREACHABLE_EMBEDDER,
    check_consistent,
    count_points,
    make_settings,
    run_script,
    script_env,
    stored_vectors,
    tree_state,
    write,
)
from qdrant_client import models

from kb.app.backend import open_store
from kb.app.ingest import run
from kb.core.errors import IngestBusy, IngestError
from kb.core.schema import DENSE, EMBEDDING, KEYWORD
from kb.core.settings import Settings
from kb.embedding.client import EmbedClient
from kb.embedding.keywords import document_vector
from kb.ingest.options import IngestOptions
from kb.ingest.progress import ConsoleProgress, Failure, Summary, format_summary
from kb.store import collection
from kb.store.points import Store


def long_note(paragraphs: int, word: str) -> str:
    """A note of `paragraphs` ~1000-char paragraphs: one chunk each."""
    para = " ".join(f"{word} sentence number {i} about {word} things." for i in range(25))
    return "\n\n".join(f"{para} (part {n})" for n in range(paragraphs)) + "\n"


def cosine(a: list[float], b: list[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


def ingest(settings: Settings, client: EmbedClient, store: Store, **kwargs) -> Summary:
    return run(settings, client, store, IngestOptions(**kwargs))


def test_notes_are_stored_then_moved_to_ingested_keeping_their_subfolder(settings, client, store):
    notes = settings.NOTES_DIR
    write(notes / "food" / "kimchi.md", KIMCHI)
    write(notes / "bread.txt", BREAD)
    write(notes / "deep" / "er" / "shock.MD", SHOCK)
    summary = ingest(settings, client, store)
    assert sorted(summary.ingested) == ["bread.txt", "deep/er/shock.MD", "food/kimchi.md"]
    assert (summary.replaced, summary.failed, summary.chunks) == ([], [], 3)
    for source, text in [("food/kimchi.md", KIMCHI), ("bread.txt", BREAD)]:
        assert not (notes / source).exists()
        assert (settings.NOTES_DIR / "ingested" / source).read_text(encoding="utf-8") == text
    check_consistent(store, settings)


def test_stored_chunks_carry_text_source_index_tags_topic_dates_and_locators(
    settings, client, store
):
    write(settings.NOTES_DIR / "food" / "kimchi.md", KIMCHI)
    write(settings.NOTES_DIR / "shock.md", SHOCK)
    before = datetime.now(UTC).replace(microsecond=0)
    ingest(settings, client, store)
    [(_, kimchi)] = store.payloads("food/kimchi.md")
    text = KIMCHI.split("---\n", 2)[2].strip()
    assert kimchi["text"] == text
    assert kimchi["source"] == "food/kimchi.md" and kimchi["chunk_index"] == 0
    assert kimchi["tags"] == ["korean cuisine", "recipes"]
    assert kimchi["topic"] == "How I make kimchi at home."
    assert kimchi["document_date"] == "2024-03-01"
    assert KIMCHI[kimchi["char_start"] : kimchi["char_end"]] == text
    assert (kimchi["line_start"], kimchi["line_end"]) == (6, 9)
    stamped = datetime.fromisoformat(kimchi["date_ingested"])
    assert stamped.utcoffset().total_seconds() == 0
    assert before <= stamped <= datetime.now(UTC)
    [(_, shock)] = store.payloads("shock.md")
    assert shock["document_date"] == "2023-11-05T14:30:00"
    assert shock["topic"] is None and shock["tags"] == ["aerodynamics"]
    assert shock["date_ingested"] == kimchi["date_ingested"]  # one timestamp per run


def test_title_heading_path_and_topic_are_embedded_with_each_chunk_which_is_stored_alone(
    settings, client, store
):
    topic = "Notes from my trip to the Alps."
    body = f"# Alps 2023\n\n## Glaciers\n\n{long_note(2, 'glacier')}\n## Summits\n\n"
    write(
        settings.NOTES_DIR / "travel" / "trip.md",
        f"---\ntopic: {topic}\n---\n{body}{long_note(1, 'summit')}",
    )
    ingest(settings, client, store)
    payloads = sorted(store.payloads("travel/trip.md"), key=lambda p: p[1]["chunk_index"])
    assert [p["heading_path"] for _, p in payloads] == [
        ["Alps 2023", "Glaciers"],
        ["Alps 2023", "Glaciers"],
        ["Alps 2023", "Summits"],
    ]
    assert {(p["title"], tuple(p["folders"])) for _, p in payloads} == {("Alps 2023", ("travel",))}
    # what each chunk's text lacks: the headings above it that it does not show itself
    context = ["", "Alps 2023 > Glaciers\n", "Alps 2023\n"]
    ids = [point for point, _ in payloads]
    stored = stored_vectors(store, ids)
    records = store.records(ids, vectors=[KEYWORD])
    keywords = {pid: vectors[KEYWORD] for pid, (_, vectors) in records.items()}
    for (point, payload), lines in zip(payloads, context, strict=True):
        assert topic not in payload["text"]
        expected = f"{lines}{topic}\n\n{payload['text']}"
        with_context, alone = client.embed_documents([expected, payload["text"]])
        assert cosine(stored[point], with_context) > 0.999
        assert cosine(stored[point], alone) < 0.99
        assert keywords[point].indices == document_vector(expected).indices


def test_a_second_run_embeds_nothing_and_ingested_notes_are_not_picked_up_again(
    settings, client, store
):
    write(settings.NOTES_DIR / "bread.txt", BREAD)
    ingest(settings, client, store)
    calls = client.calls
    summary = ingest(settings, client, store)
    assert (summary.ingested, summary.failed, client.calls) == ([], [], calls)
    write(settings.NOTES_DIR / "new.md", KIMCHI)
    summary = ingest(settings, client, store)
    assert summary.ingested == ["new.md"]
    assert client.calls == calls + 1
    check_consistent(store, settings)


def test_a_redropped_note_replaces_its_old_chunks_and_its_old_file(settings, client, store):
    notes = settings.NOTES_DIR
    write(notes / "sub" / "trip.md", long_note(4, "glacier"))
    write(notes / "other.md", BREAD)
    ingest(settings, client, store)
    assert count_points(store, "sub/trip.md") == 4
    new_version = "---\ntags: [Alps]\n---\n" + long_note(2, "summit")
    write(notes / "sub" / "trip.md", new_version)
    summary = ingest(settings, client, store)
    assert (summary.ingested, summary.replaced) == (["sub/trip.md"], ["sub/trip.md"])
    assert (settings.NOTES_DIR / "ingested" / "sub" / "trip.md").read_text(
        encoding="utf-8"
    ) == new_version
    assert not (notes / "sub" / "trip.md").exists()
    texts = [p["text"] for _, p in store.payloads("sub/trip.md")]
    assert len(texts) == 2 and all("summit" in t and "glacier" not in t for t in texts)
    assert {tuple(p["tags"]) for _, p in store.payloads("sub/trip.md")} == {("alps",)}
    assert count_points(store, "other.md") == 1
    check_consistent(store, settings)


def test_rebuild_reembeds_every_note_and_leaves_ingested_files_where_they_are(
    settings, client, store
):
    notes, ingested = settings.NOTES_DIR, settings.NOTES_DIR / "ingested"
    write(notes / "a.md", long_note(2, "alpha"))
    write(notes / "sub" / "b.txt", BREAD)
    ingest(settings, client, store)
    inode_a = (ingested / "a.md").stat().st_ino
    kept_b = tree_state(ingested)["sub/b.txt"]
    write(notes / "c.md", SHOCK)
    write(notes / "a.md", long_note(1, "omega"))  # re-dropped: only this version is embedded
    calls = client.calls
    summary = ingest(settings, client, store, rebuild=True)
    assert summary.rebuilt
    assert sorted(summary.ingested) == ["a.md", "c.md", "sub/b.txt"]
    assert summary.replaced == ["a.md"]
    assert client.calls == calls + 1  # 3 chunks in one request: old a.md was not embedded
    assert tree_state(ingested)["sub/b.txt"] == kept_b
    assert (ingested / "a.md").stat().st_ino != inode_a  # replaced by the re-dropped file
    assert not any(p.suffix == ".md" for p in notes.iterdir())
    assert not collection.info(store).rebuild_incomplete
    check_consistent(store, settings)
    assert "omega" in store.payloads("a.md")[0][1]["text"]


def test_a_collection_built_by_another_model_is_rebuilt_beside_it_and_takes_its_name(
    settings, client, store
):
    collection.create(store, "some-other-model", client.dimensions)
    write(settings.NOTES_DIR / "a.md", KIMCHI)
    ingest(settings, client, store)  # no --rebuild: kb.ingest.switch builds beside, then switches
    assert collection.info(store).model == client.model
    assert store.target() != "notes" and store.collection_names() == [store.target()]
    check_consistent(store, settings)


def test_a_collection_from_before_keyword_vectors_is_rebuilt_beside_it_and_takes_its_name(
    settings, client, store
):
    # the layout the previous version created: a dense vector only
    store.create_collection(
        dense={DENSE: models.VectorParams(size=client.dimensions, distance=models.Distance.COSINE)},
        sparse={},
        metadata={"embed_model": client.model, "embed_dimensions": client.dimensions},
    )
    write(settings.NOTES_DIR / "a.md", KIMCHI)
    ingest(settings, client, store)  # rebuilt beside it (kb.ingest.switch), then switched
    assert collection.info(store).keyword
    assert store.collection_names() == [store.target()]
    check_consistent(store, settings)


def test_bad_yaml_stops_the_run_naming_file_and_line_before_anything_is_written(
    settings, client, store
):
    notes = settings.NOTES_DIR
    write(notes / "good.md", KIMCHI)
    write(notes / "sub" / "bad.md", "---\ntags: [a, b\ntopic: x\n---\nbody\n")
    before = tree_state(notes)
    with pytest.raises(IngestError) as caught:
        ingest(settings, client, store)
    message = str(caught.value)
    assert "sub/bad.md" in message and "line 3" in message and "not valid YAML" in message
    assert tree_state(notes) == before
    assert collection.info(store) is None
    assert client.calls == 0


def test_a_malformed_corpus_is_reported_file_by_file_and_nothing_is_altered_or_lost(
    tmp_path, settings, client, store
):
    notes = settings.NOTES_DIR
    outside = write(tmp_path / "elsewhere" / "secret.md", "not part of the notes folder\n")
    write(notes / "good.md", KIMCHI)
    write(notes / "sub" / "good.txt", BREAD)
    write(notes / "yaml.md", "---\ntopic: [unclosed\n---\nbody\n")
    write(notes / "empty.md", b"")
    write(notes / "latin1.md", "caf\u00e9 cr\u00e8me".encode("latin-1"))
    write(notes / "nul.txt", b"text\x00with a NUL")
    write(notes / "huge.md", b"word " * (4 * 1024 * 1024))  # 20 MB
    write(notes / "only_meta.md", "---\ntags: [a]\n---\n")
    write(notes / "date.md", "---\ndocument_date: someday\n---\nbody\n")
    write(notes / "x.md" / "inside.md", SHOCK)  # a folder named like a note
    os.symlink(outside, notes / "outside.md")
    os.symlink(notes / "good.md", notes / "alias.md")
    os.mkfifo(notes / "pipe.md")
    write(notes / "picture.png", b"\x89PNG\r\n")
    before = tree_state(notes)
    outside_before = tree_state(outside.parent)

    with pytest.raises(IngestError, match=r"yaml\.md: frontmatter is not valid YAML \(line 3"):
        ingest(settings, client, store)
    assert tree_state(notes) == before

    fixed = "---\ntopic: fixed\n---\nbody\n"
    write(notes / "yaml.md", fixed)
    before["yaml.md"] = tree_state(notes)["yaml.md"]
    summary = ingest(settings, client, store)

    assert sorted(summary.ingested) == ["good.md", "sub/good.txt", "x.md/inside.md", "yaml.md"]
    reasons = {f.source: f.reason for f in summary.failed}
    assert set(reasons) == {
        "empty.md",
        "latin1.md",
        "nul.txt",
        "huge.md",
        "only_meta.md",
        "date.md",
        "x.md",
        "outside.md",
        "alias.md",
        "pipe.md",
    }
    assert reasons["empty.md"] == "empty file"
    assert "not UTF-8" in reasons["latin1.md"]
    assert "NUL byte" in reasons["nul.txt"]
    assert "too large" in reasons["huge.md"] and "NOTE_MAX_BYTES" in reasons["huge.md"]
    assert "no text after the frontmatter" in reasons["only_meta.md"]
    assert "document_date" in reasons["date.md"]
    assert "folder" in reasons["x.md"]
    assert "symlink pointing outside" in reasons["outside.md"]
    assert "symlink" in reasons["alias.md"]
    assert "not a regular file" in reasons["pipe.md"]
    assert summary.ignored == ["picture.png"]

    after = {
        **tree_state(notes),
        **{k: v for k, v in tree_state(settings.NOTES_DIR / "ingested").items()},
    }
    for rel, state in before.items():
        assert after.get(rel) == state, f"{rel} altered or lost"
    assert tree_state(outside.parent) == outside_before
    check_consistent(store, settings)


def test_a_folder_in_the_way_in_ingested_keeps_the_note_in_the_inbox(settings, client, store):
    write(settings.NOTES_DIR / "other.md", BREAD)
    ingest(settings, client, store)
    write(settings.NOTES_DIR / "n.md", KIMCHI)
    (settings.NOTES_DIR / "ingested" / "n.md").mkdir()
    summary = ingest(settings, client, store)
    assert [f.source for f in summary.failed] == ["n.md"]
    assert "not a file" in summary.failed[0].reason
    assert (settings.NOTES_DIR / "n.md").read_text(encoding="utf-8") == KIMCHI


def test_a_move_interrupted_between_link_and_unlink_is_finished_next_run(settings, client, store):
    write(settings.NOTES_DIR / "n.md", KIMCHI)
    ingest(settings, client, store)
    # a crash right after os.link: the note has both names
    os.link(settings.NOTES_DIR / "ingested" / "n.md", settings.NOTES_DIR / "n.md")
    summary = ingest(settings, client, store)
    assert summary.ingested == ["n.md"] and summary.replaced == []
    assert not (settings.NOTES_DIR / "n.md").exists()
    assert (settings.NOTES_DIR / "ingested" / "n.md").read_text(encoding="utf-8") == KIMCHI
    check_consistent(store, settings)


def test_a_note_whose_ingested_folder_cannot_be_made_stays_in_the_inbox_and_the_rest_move(
    settings, client, store
):
    write(settings.NOTES_DIR / "ingested" / "trips", "a file where ingest needs a folder\n")
    write(settings.NOTES_DIR / "trips" / "alps" / "walk.md", KIMCHI)
    write(settings.NOTES_DIR / "bread.txt", BREAD)

    summary = ingest(settings, client, store)

    assert summary.ingested == ["bread.txt"]
    [failure] = summary.failed
    assert failure.source == "trips/alps/walk.md" and "stored, but not moved" in failure.reason
    assert (settings.NOTES_DIR / "trips" / "alps" / "walk.md").read_text(encoding="utf-8") == KIMCHI
    assert (settings.NOTES_DIR / "ingested" / "bread.txt").read_text(encoding="utf-8") == BREAD


def test_a_lost_collection_is_rebuilt_from_ingested_notes_on_the_next_run(settings, client, store):
    write(settings.NOTES_DIR / "a.md", KIMCHI)
    ingest(settings, client, store)
    collection.drop(store)  # e.g. the Qdrant volume was deleted
    write(settings.NOTES_DIR / "b.txt", BREAD)
    summary = ingest(settings, client, store)
    assert sorted(summary.ingested) == ["a.md", "b.txt"]
    check_consistent(store, settings)


def spawn(code: str, settings: Settings, embed_url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=script_env(settings, EMBED_URL=embed_url, EMBED_BATCH_SIZE="2"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def kill_at(settings: Settings, embed_url: str, stop_at: str, *args: str) -> str:
    """Run an ingest in a subprocess (the embedder at `embed_url`), SIGKILL it at `stop_at`,
    return the line it parked on."""
    proc = spawn(KILLABLE_INGEST, settings, embed_url, stop_at, *args)
    try:
        line = proc.stdout.readline().strip()  # blocks until the parking point is reached
        assert line and line != "finished", f"ingest did not stop at {stop_at}"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return line


def test_ingest_killed_with_sigkill_and_rerun_leaves_no_duplicates_orphans_or_lost_notes(
    settings, client, embedder_url
):
    notes = settings.NOTES_DIR
    texts = {f"n{i}.md": f"Note number {i} is about topic {i * 7}.\n" for i in range(6)}
    texts["n4.md"] = long_note(3, "glacier")  # one note of three chunks
    for age, (name, text) in enumerate(texts.items()):
        # embedding goes newest first: n0 is the one edited last
        os.utime(write(notes / name, text), ns=(10**18 - age * 10**9,) * 2)
    # EMBED_BATCH_SIZE=2 groups notes by up to 2 chunks: [n0 n1] [n2 n3] [n4] [n5]
    assert (
        kill_at(settings, embedder_url, "first-done") == "done n0.md"
    )  # its group is moved together
    assert (settings.NOTES_DIR / "ingested" / "n1.md").is_file() and (notes / "n2.md").is_file()
    # the first group is done; now the groups are [n2 n3] [n4] [n5]
    assert kill_at(settings, embedder_url, "stored:n4.md") == "stored n4.md"
    assert not (notes / "n3.md").exists() and (notes / "n4.md").is_file()
    with open_store(settings) as store:
        assert count_points(store, "n4.md") == 3
    texts["n4.md"] = long_note(1, "summit")  # edited after the crash: now one chunk
    write(notes / "n4.md", texts["n4.md"])

    with open_store(settings) as store:
        summary = run(settings, client, store)
        assert sorted(summary.ingested) == ["n4.md", "n5.md"]
        check_consistent(store, settings)
        assert count_points(store) == 6
    assert not any(notes.glob("*.md"))
    for name, text in texts.items():
        assert (settings.NOTES_DIR / "ingested" / name).read_text(encoding="utf-8") == text


def test_a_rebuild_killed_midway_is_finished_by_the_next_plain_run(settings, client, embedder_url):
    for i in range(6):
        write(settings.NOTES_DIR / f"n{i}.md", f"Note number {i}, about subject {i * 11}.\n")
    with open_store(settings) as store:
        run(settings, client, store)
    for i in range(6):  # edited where they lie: the rebuild has every note to rewrite
        path = write(
            settings.NOTES_DIR / "ingested" / f"n{i}.md",
            f"Note number {i}, revised: topic {i * 13}.\n",
        )
        os.utime(path, ns=(10**18 - i * 10**9,) * 2)  # n0 edited last: embedded first
    assert kill_at(settings, embedder_url, "stored:n2.md", "rebuild") == "stored n2.md,n3.md"
    with open_store(settings) as store:
        assert collection.info(store).rebuild_incomplete
        whole = sorted(p["source"] for _, p in store.payloads() if EMBEDDING not in p)
        assert whole == ["n0.md", "n1.md", "n2.md", "n3.md"]  # the first two groups
        # every note was stored by its new words before any was embedded
        assert all("revised" in p["text"] for _, p in store.payloads())
        summary = run(settings, client, store)
        assert len(summary.ingested) == 6 and len(summary.unchanged) == 4
        assert not collection.info(store).rebuild_incomplete
        assert all("revised" in p["text"] for _, p in store.payloads())
        check_consistent(store, settings)


def test_a_second_ingest_py_joins_the_running_one_and_runs_once_it_is_done(
    settings, embedder_url, client, tmp_path
):
    # `ingest.py` right after `make local`, while the server's watcher syncs: it used to
    # answer "another ingest is running" and exit 1
    write(settings.NOTES_DIR / "a.md", KIMCHI)
    with open_store(settings) as store:  # what the running sync stores, here before it
        assert run(settings, client, store).added == ["a.md"]
    holder = spawn(LOCK_HOLDER, settings, settings.EMBED_URL)  # it embeds nothing
    try:
        assert holder.stdout.readline().strip() == "locked"
        (tmp_path / "other").mkdir()
        with (  # an in-process run (the watcher's batch) is still refused: it retries later
            open_store(make_settings(tmp_path / "other")) as other_store,
            pytest.raises(IngestBusy, match=f"another ingest is running \\(pid {holder.pid}\\)"),
        ):
            run(settings, client, other_store)
        joining = subprocess.Popen(
            [sys.executable, str(REPO_ROOT / "ingest.py")],
            env=script_env(settings, EMBED_URL=embedder_url), cwd=tmp_path, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert joining.stderr is not None
        said = joining.stderr.readline().strip()
        assert said == f"joining the ingest running in pid {holder.pid}: starting"
        assert joining.poll() is None  # it waits
    finally:
        holder.communicate("", timeout=30)
    out, err = joining.communicate(timeout=120)
    assert joining.returncode == 0, err
    assert "that ingest is done; now this one" in err
    assert "the ingest it joined had done it all: nothing was left to change" in err
    assert out.startswith("ingested 0 notes (0 chunks)"), out  # a.md was stored and moved


def test_ingest_script_reports_a_down_embedder_in_one_line_then_ingests_and_summarises(
    settings, embedder_url, tmp_path
):
    write(settings.NOTES_DIR / "a.md", KIMCHI)
    write(settings.NOTES_DIR / "empty.md", "")
    down = make_settings(tmp_path, UNREACHABLE_EMBEDDER)
    result = run_script("ingest.py", env=script_env(down), cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].startswith(
        f"error: embedder at {UNREACHABLE_EMBEDDER} unreachable"
    )
    assert (settings.NOTES_DIR / "a.md").is_file()

    result = run_script("ingest.py", env=script_env(settings, EMBED_URL=embedder_url), cwd=tmp_path)
    assert result.returncode == 1  # one note failed
    assert "ingested 1 notes (1 chunks)" in result.stdout
    assert ": 1 new, 0 replaced, 0 already up to date;" in result.stdout
    assert result.stdout.count("failed: empty.md: empty file") == 1
    assert "empty.md" not in result.stderr  # each failure is printed once, in the summary
    assert "failed: empty.md: empty file" in result.stdout
    assert "ingesting 1 notes (1 chunks)" in result.stderr
    assert "1/1 notes, 1/1 chunks" in result.stderr  # the final progress line in logs
    assert "\x1b" not in result.stderr  # no terminal control codes when not a TTY


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_redraws_one_terminal_line_with_rate_and_eta_and_leaves_failures_to_the_summary():
    out, clock = io.StringIO(), FakeClock()
    progress = ConsoleProgress(out, tty=True, clock=clock)
    progress.start(notes=4, chunks=40)
    clock.now += 5
    progress.done("a.md", 10)
    progress.failed(Failure("b.md", "empty file"))
    clock.now += 5
    progress.done("c.md", 10)
    progress.finish(Summary())
    text = out.getvalue()
    assert "\r\x1b[K[#####...............] 1/4 notes, 10/40 chunks, 2.0 chunks/s, ETA 15s" in text
    assert "failed" not in text  # listed once, by the summary
    assert "\r\x1b[K[##########..........] 2/4 notes, 20/40 chunks, 2.0 chunks/s, ETA 10s" in text
    assert text.endswith("\r\x1b[K")


def test_the_summary_gives_a_pace_only_for_what_was_embedded():
    unchanged = Summary(unchanged=["a.md"], chunks=650, seconds=1.0)
    assert "chunks/s" not in format_summary(unchanged)  # once "649.9 chunks/s" for nothing
    cached = Summary(added=["a.md"], chunks=10, written=10, embedded_cached=10, seconds=1.0)
    assert "chunks/s" not in format_summary(cached)
    embedded = Summary(added=["a.md"], unchanged=["b.md"], chunks=650, written=10, seconds=2.0)
    assert "in 2.0s, 5.0 chunks/s embedded: 1 new" in format_summary(embedded)


def test_progress_prints_plain_lines_at_intervals_when_not_a_terminal():
    out, clock = io.StringIO(), FakeClock()
    progress = ConsoleProgress(out, tty=False, interval=5.0, clock=clock)
    progress.start(notes=3, chunks=300)
    clock.now += 1
    progress.done("a.md", 100)  # too soon for a line
    clock.now += 9
    progress.done("b.md", 100)
    progress.finish(Summary())
    assert out.getvalue().splitlines() == [
        "ingesting 3 notes (300 chunks)",
        "2/3 notes, 200/300 chunks, 20.0 chunks/s, ETA 5s",
    ]


def test_each_sources_progress_counts_its_own_notes_so_done_never_passes_the_total(
    settings: Settings, embedder_url, tmp_path
):
    vault = tmp_path / "vault"
    write(vault / "bread.txt", BREAD)
    for n in range(3):
        write(settings.NOTES_DIR / f"inbox-{n}.md", f"# Note {n}\n\nAn inbox note, number {n}.\n")
    env = script_env(
        settings, EMBED_URL=embedder_url, NOTE_FOLDERS=f"vault={vault}", LOG_LEVEL="WARNING"
    )
    done = run_script("ingest.py", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    counts = [
        tuple(map(int, m.groups()))
        for m in re.finditer(r"(\d+)/(\d+) notes, (\d+)/(\d+) chunks", done.stderr)
    ]
    assert counts == [(3, 3, 3, 3), (1, 1, 1, 1)], done.stderr  # the inbox, then the folder
