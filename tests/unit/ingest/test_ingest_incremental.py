"""Ingest writes only what changed: unchanged re-drops are just moved, and --rebuild of a
collection made for the same model updates it in place (real embedder, embedded Qdrant)."""

from collections.abc import Sequence

import pytest
from ingest_fixtures import BREAD, KIMCHI, SHOCK, check_consistent, count_points, write

from kb.app.ingest import run
from kb.core.schema import DENSE, FILE_DELETED, KEYWORD, KeywordVector
from kb.ingest import lifecycle
from kb.ingest.options import IngestOptions
from kb.ingest.progress import format_summary
from kb.search.query import search
from kb.store import collection
from kb.store.points import Point, Store


@pytest.fixture
def writes(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The notes of every Store.replace call, which still goes through to Qdrant."""
    seen: list[list[str]] = []
    real = store.replace

    def replace(points: Sequence[Point], sources) -> None:
        seen.append(sorted({p.payload["source"] for p in points}))
        real(points, sources)

    monkeypatch.setattr(store, "replace", replace)
    return seen


def dates(store: Store) -> dict[str, str]:
    return {pid: payload["date_ingested"] for pid, payload in store.payloads()}


def ingest_three(settings, client, store) -> None:
    write(settings.NOTES_DIR / "kimchi.md", KIMCHI)
    write(settings.NOTES_DIR / "sub" / "bread.txt", BREAD)
    write(settings.NOTES_DIR / "shock.md", SHOCK)
    run(settings, client, store)


def test_a_redropped_unchanged_note_is_moved_without_rewriting_its_points(
    settings, client, store, writes
):
    ingest_three(settings, client, store)
    before, calls = dates(store), client.calls
    write(settings.NOTES_DIR / "kimchi.md", KIMCHI)  # the same bytes again
    writes.clear()

    summary = run(settings, client, store)

    assert summary.ingested == ["kimchi.md"] and summary.unchanged == ["kimchi.md"]
    assert summary.added == summary.replaced == []  # counted once, as already up to date
    assert ": 0 new, 0 replaced, 1 already up to date;" in format_summary(summary)
    assert writes == [] and client.calls == calls
    assert dates(store) == before  # nothing rewritten, so the first ingest date stands
    assert not (settings.NOTES_DIR / "kimchi.md").exists()
    assert (settings.NOTES_DIR / "ingested" / "kimchi.md").read_text(encoding="utf-8") == KIMCHI
    check_consistent(store, settings)


def test_a_redropped_note_with_only_new_tags_is_rewritten_without_embedding_again(
    settings, client, store, writes
):
    ingest_three(settings, client, store)
    calls = client.calls
    write(settings.NOTES_DIR / "shock.md", SHOCK.replace("tags: aerodynamics", "tags: [physics]"))
    writes.clear()

    summary = run(settings, client, store)

    assert len(summary.unchanged) == 0 and writes == [["shock.md"]]
    assert client.calls == calls  # same embedded text: the vector comes from the cache
    assert [p["tags"] for _, p in store.payloads("shock.md")] == [["physics"]]


def test_rebuilding_an_unchanged_corpus_writes_nothing_and_keeps_ingest_dates(
    settings, client, store, writes
):
    ingest_three(settings, client, store)
    before, calls = dates(store), client.calls
    writes.clear()

    summary = run(settings, client, store, IngestOptions(rebuild=True))

    assert summary.rebuilt and len(summary.unchanged) == 3
    assert sorted(summary.ingested) == ["kimchi.md", "shock.md", "sub/bread.txt"]
    assert writes == [] and client.calls == calls
    assert dates(store) == before
    assert not collection.info(store).rebuild_incomplete
    check_consistent(store, settings)


def test_rebuild_in_place_rewrites_notes_edited_in_ingested_and_soft_deletes_notes_deleted_there(
    settings, client, store, writes
):
    ingest_three(settings, client, store)
    kimchi = settings.NOTES_DIR / "ingested" / "kimchi.md"
    kept = kimchi.read_bytes()
    write(settings.NOTES_DIR / "ingested" / "shock.md", SHOCK.replace("supersonic", "hypersonic"))
    kimchi.unlink()
    writes.clear()

    summary = run(settings, client, store, IngestOptions(rebuild=True))

    # its new text stored by its words, then with its meaning (kb.ingest.run: words first)
    assert writes == [["shock.md"], ["shock.md"]] and len(summary.unchanged) == 1
    assert summary.deleted == ["kimchi.md"]
    deleted = [(n.source, n.cause) for n in lifecycle.list_deleted(store)]
    assert deleted == [("kimchi.md", FILE_DELETED)]  # hidden, its points kept
    assert "kimchi.md" not in [h.source for h in search(store, client, "gochugaru cabbage")]
    assert "hypersonic" in store.payloads("shock.md")[0][1]["text"]

    kimchi.write_bytes(kept)  # the file is back unchanged: restored, nothing embedded
    calls = client.calls
    summary = run(settings, client, store, IngestOptions(rebuild=True))
    assert summary.restored == ["kimchi.md"] and writes == [["shock.md"], ["shock.md"]]
    assert client.calls == calls and lifecycle.list_deleted(store) == []
    check_consistent(store, settings)


def test_rebuild_keeps_the_points_of_a_stored_note_it_can_no_longer_read_and_reports_it(
    settings, client, store
):
    ingest_three(settings, client, store)
    write(settings.NOTES_DIR / "ingested" / "sub" / "bread.txt", b"\xff\xfe not utf-8 any more")

    summary = run(settings, client, store, IngestOptions(rebuild=True))

    assert [f.source for f in summary.failed] == ["ingested/sub/bread.txt"]
    assert count_points(store, "sub/bread.txt") == 1  # still searchable until the file is fixed
    assert not collection.info(store).rebuild_incomplete


def test_points_written_without_a_fingerprint_are_rewritten_by_the_next_ingest(
    settings, client, store, writes
):
    ingest_three(settings, client, store)
    ids = [pid for pid, _ in store.payloads("kimchi.md")]
    # as an older version wrote them: the same points without the field
    older = [
        Point(pid, vectors[DENSE], {k: v for k, v in payload.items() if k != "note_hash"},
              KeywordVector(vectors[KEYWORD].indices, vectors[KEYWORD].values))
        for pid, (payload, vectors) in store.records(ids, vectors=True).items()
    ]  # fmt: skip
    store.replace(older, ["kimchi.md"])
    assert all("note_hash" not in p for _, p in store.payloads("kimchi.md"))
    write(settings.NOTES_DIR / "kimchi.md", KIMCHI)
    writes.clear()

    summary = run(settings, client, store)

    assert len(summary.unchanged) == 0 and writes == [["kimchi.md"]]
    assert all(p["note_hash"] for _, p in store.payloads("kimchi.md"))
