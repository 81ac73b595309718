"""A definition question ("what is a canvas") shows the note it names by its first lines, where a
note introduces its subject, not by whichever chunk matched best (kb.search.lead); its rank and
confidence stay search's, and any other question still shows the best chunk."""

from __future__ import annotations

from ingest_fixtures import write

from kb.app.ingest import run
from kb.core.settings import Settings
from kb.embedding.client import EmbedClient
from kb.search import SearchRequest, search
from kb.search.entry import Searcher
from kb.search.lead import names, subject
from kb.search.query import search as first_stage
from kb.store.points import Store

LEAD = (
    "An infinite board for laying out notes, images and links side by side. "
    + " ".join(
        f"Setting {i}: the file is saved as JSON next to your notes, synced by your sync "
        f"service, and opened with keyboard shortcut {i}."
        for i in range(12)
    )
    + "\n\n"
)
CANVAS = (
    f"# Canvas\n\n{LEAD}## Add cards\n\nA canvas holds cards: drag a note onto the canvas, "
    "resize the canvas card, link canvas cards with arrows.\n"
)
OTHER = "# Gardening\n\nWater the tomatoes every morning; a canvas bag holds the tools.\n"


def ingested(settings: Settings, client: EmbedClient, store: Store) -> Searcher:
    write(settings.NOTES_DIR / "Canvas.md", CANVAS)
    write(settings.NOTES_DIR / "Gardening.md", OTHER)
    run(settings, client, store)
    return Searcher(store, client)


def shown(searcher: Searcher, query: str) -> tuple[int, str, float | None]:
    hits = search(searcher, SearchRequest(query, rerank=False)).hits
    hit = next(h for h in hits if h.source == "Canvas.md")
    return hits.index(hit), hit.text, hit.confidence


def test_a_definition_question_shows_the_named_note_by_its_first_chunk(settings, client, store):
    searcher = ingested(settings, client, store)
    best = first_stage(store, client, "what is a canvas", 5, per_note=1)
    canvas = next(h for h in best if h.source == "Canvas.md")
    assert canvas.chunk_index != 0  # the card chunks match the word best: the case to mend
    rank, text, confidence = shown(searcher, "what is a canvas")
    assert text.startswith("# Canvas\n\nAn infinite board")
    assert rank == [h.source for h in best].index("Canvas.md")
    assert confidence is not None


def test_another_question_about_the_note_still_shows_its_best_chunk(settings, client, store):
    searcher = ingested(settings, client, store)
    _, text, _ = shown(searcher, "how do I add cards to a canvas")
    assert "drag a note" in text


def test_a_definition_question_names_its_subject_and_a_title_with_the_same_terms():
    assert subject("What is a canvas?") == "canvas"
    assert subject("what's the outbox pattern") == "outbox pattern"
    assert subject("define idempotency") == "idempotency"
    assert subject("how do I make a canvas") is None
    assert subject("What's the graph view?") == "graph view"
    assert subject("how do I embed one note in another") is None
    long = "what is the basic mechanism of the transonic aileron buzz"
    assert subject(long) is None  # a question, not a name
    assert names("workflow", "Workflows") and names("rate limit", "Rate limits")
    assert not names("lease", "Leases and timeouts") and not names("canvas", "")
