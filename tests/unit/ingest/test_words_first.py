"""Words first, meaning next: an ingest stores every note by its words before it embeds any, so
keyword (and hybrid) search finds each note while embedding is still under way; embedding goes
newest first, status shows how far it is, and a stopped run resumes without redoing work."""

from __future__ import annotations

import gc
import io
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from ingest_fixtures import make_settings, write

from kb.app.ingest import run
from kb.app.query_print import explained
from kb.app.status import status
from kb.core.errors import IngestError
from kb.core.schema import EMBEDDING
from kb.core.settings import Settings
from kb.embedding.client import EmbedClient
from kb.embedding.keywords import query_vector
from kb.ingest.options import IngestOptions
from kb.ingest.prepare import Prepared
from kb.ingest.progress import ConsoleProgress, Summary
from kb.search.entry import Searcher, SearchRequest, search
from kb.store.points import Store

NOTES = 2000
BATCH = 16  # chunks per embedder request (EMBED_BATCH_SIZE): one group of one-chunk notes
WAIT_S = 300.0  # how long a held batch or the test waits for the other side (never reached)


def word(n: int) -> str:
    """A word only note `n` contains: letters only, so it is one keyword term of its own."""
    letters = ""
    while True:
        n, digit = divmod(n, 26)
        letters += chr(ord("a") + digit)
        if n == 0:
            return "zq" + letters + "vx"


class HeldEmbedder(EmbedClient):
    """The real embedder, held back: each batch of documents waits for a permit the test
    gives (a deliberately slow embedder whose pace the test sets); `asked` counts batches
    asked for, `texts` the texts embedded."""

    def __init__(self, url: str, **options: object) -> None:
        super().__init__(url, **options)  # type: ignore[arg-type]
        self.permits = threading.Semaphore(0)
        self.asked = 0
        self.texts = 0
        self.changed = threading.Condition()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        with self.changed:
            self.asked += 1
            self.changed.notify_all()
        if not self.permits.acquire(timeout=WAIT_S):
            raise AssertionError("the test never let this batch through")
        vectors = super().embed_documents(texts)
        self.texts += len(texts)
        return vectors

    def wait_asked(self, batches: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.asked >= batches, timeout=WAIT_S)


def held_run(settings: Settings, client: EmbedClient, store: Store, options: IngestOptions):
    """The ingest in a thread; its outcome (Summary or IngestError) in the list returned."""
    outcome: list[Summary | IngestError] = []

    def go() -> None:
        try:
            outcome.append(run(settings, client, store, options))
        except IngestError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread, outcome


@pytest.fixture
def big_inbox(tmp_path: Path, embedder_url: str) -> Settings:
    settings = make_settings(tmp_path, embedder_url, EMBED_BATCH_SIZE=BATCH)
    for n in range(NOTES):
        path = write(settings.NOTES_DIR / f"note-{n:04d}.md", f"# Note {n}\n\nIt says {word(n)}.\n")
        os.utime(path, ns=(n * 10**9, n * 10**9))  # a higher number: edited later
    return settings


@pytest.fixture
def held_embedders(big_inbox: Settings) -> Iterator[Callable[[], HeldEmbedder]]:
    """Held embedders for the test's runs, each closed at its end."""
    made: list[HeldEmbedder] = []

    def make() -> HeldEmbedder:
        made.append(HeldEmbedder(big_inbox.EMBED_URL, batch_size=BATCH))
        return made[-1]

    yield make
    for held in made:
        held.close()


def keyword_hit(store: Store, n: int) -> str | None:
    """The first note keyword search finds for note `n`'s own word."""
    hits = store.query(1, keyword=query_vector(word(n)))
    return hits[0].source if hits else None


def test_every_note_is_found_by_its_own_word_while_embedding_is_under_way_and_a_stop_loses_nothing(
    big_inbox: Settings,
    client: EmbedClient,
    store: Store,
    held_embedders: Callable[[], HeldEmbedder],
):
    settings = big_inbox
    held = held_embedders()
    stop = threading.Event()
    thread, outcome = held_run(settings, held, store, IngestOptions(stop=stop))
    held.wait_asked(1)  # every note stored by its words; not one embedded
    held.permits.release()  # one batch through: the newest notes
    held.wait_asked(2)

    missed = [n for n in range(NOTES) if keyword_hit(store, n) != f"note-{n:04d}.md"]
    assert missed == []
    searcher = Searcher(store, client)
    for n in range(0, NOTES, 97):  # hybrid over the partly embedded index: once per note
        hits = search(searcher, SearchRequest(word(n), k=10, rerank=False, per_note=0)).hits
        assert f"note-{n:04d}.md" in [h.source for h in hits]
        assert len({h.source for h in hits}) == len(hits)

    why = search(searcher, SearchRequest(word(0), k=1, rerank=False, explain=True)).hits[0]
    assert why.source == "note-0000.md"  # the oldest: still waiting for its meaning
    assert explained(why).startswith("why: semantic: not embedded yet (found by its words) · ")

    whole = sorted(str(p["source"]) for _, p in store.payloads() if EMBEDDING not in p)
    assert whole == [f"note-{n:04d}.md" for n in range(NOTES - BATCH, NOTES)]  # newest first
    now = status(settings, store)
    assert now.unembedded == NOTES - BATCH
    assert now.ingest is not None
    figures = re.fullmatch(
        rf"{BATCH}/{NOTES} notes, {BATCH}/{NOTES} chunks, [\d.]+ chunks/s, ETA (\S+); "
        rf"{NOTES}/{NOTES} notes findable by words",
        now.ingest,
    )
    assert figures is not None, now.ingest
    assert figures[1] != "?"  # a time left, from the pace of the batch embedded

    stop.set()  # Ctrl-C: the run ends after the batch under way
    held.permits.release()
    thread.join(WAIT_S)
    assert isinstance(outcome[0], IngestError) and "interrupted" in str(outcome[0])
    assert status(settings, store).ingest is None  # nothing under way any more
    assert keyword_hit(store, 0) == "note-0000.md"  # still found by its words

    # the next run embeds what is left, newest first, and nothing embedded before the stop
    again, stop = held_embedders(), threading.Event()
    thread, outcome = held_run(settings, again, store, IngestOptions(stop=stop))
    again.wait_asked(1)
    stop.set()
    again.permits.release()
    thread.join(WAIT_S)
    assert isinstance(outcome[0], IngestError), outcome
    assert again.texts == BATCH
    whole = sorted(str(p["source"]) for _, p in store.payloads() if EMBEDDING not in p)
    assert whole == [f"note-{n:04d}.md" for n in range(NOTES - 3 * BATCH, NOTES)]
    assert status(settings, store).unembedded == NOTES - 3 * BATCH


def test_the_progress_line_counts_notes_findable_by_words_and_paces_only_what_is_embedded():
    now = [100.0]
    progress = ConsoleProgress(io.StringIO(), tty=False, clock=lambda: now[0])
    progress.start(notes=4, chunks=40)
    progress.done("unchanged.md", 10)  # nothing to embed: done at once
    progress.findable(3, 30)
    progress.embedding(3, 30)
    now[0] += 10
    progress.done("newest.md", 10)
    assert progress.line() == (
        "2/4 notes, 20/40 chunks, 1.0 chunks/s, ETA 20s; 4/4 notes findable by words"
    )


def held_notes() -> list[Prepared]:
    """The notes read by a run that are still held in memory."""
    gc.collect()
    return [o for o in gc.get_objects() if type(o) is Prepared]  # no isinstance: a deprecated
    # object among them warns when its class is asked for


def test_a_run_holds_a_notes_texts_only_while_its_group_is_written_and_a_written_note_no_longer(
    big_inbox: Settings, store: Store, held_embedders: Callable[[], HeldEmbedder]
):
    held = held_embedders()
    stop = threading.Event()
    thread, outcome = held_run(big_inbox, held, store, IngestOptions(stop=stop))
    held.wait_asked(1)  # every note stored by its words; the newest group asked for
    notes = held_notes()
    assert len(notes) == NOTES
    assert sum("texts" in vars(p) or "records" in vars(p) for p in notes) <= BATCH
    del notes  # the group being embedded has its texts, no other note

    for _ in range(3):
        held.permits.release()
    held.wait_asked(4)
    # three groups written and let go; one more embedding, and the next note read ahead
    assert len(held_notes()) <= NOTES - 3 * BATCH + 1

    stop.set()
    held.permits.release()
    thread.join(WAIT_S)
    assert isinstance(outcome[0], IngestError)
