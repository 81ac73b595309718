"""Never embed the same text twice: the content-addressed vector cache, through real ingest."""

from pathlib import Path

import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import BREAD, KIMCHI, SHOCK, count_points, make_settings, stored_vectors, write

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.core.schema import SCHEMA_VERSION
from kb.core.state import CACHE_NAME
from kb.embedding.cache import EmbedCache, content_key
from kb.ingest.options import IngestOptions
from kb.store import collection


def paragraphs(n: int) -> list[str]:
    """n distinct ~900-character paragraphs: each becomes a chunk of its own."""
    return [
        " ".join(f"Paragraph {i} sentence {j} about glacier walk number {i}." for j in range(18))
        for i in range(n)
    ]


def test_rebuilding_from_scratch_reuses_every_vector_and_makes_no_embedding_calls(
    settings, client, store
):
    write(settings.NOTES_DIR / "kimchi.md", KIMCHI)
    write(settings.NOTES_DIR / "sub" / "bread.txt", BREAD)
    run(settings, client, store)
    before = {
        pid: vec for pid, vec in stored_vectors(store, [p for p, _ in store.payloads()]).items()
    }
    # a collection from an older payload layout: the rebuild re-creates it, re-embedding nothing
    store.update_metadata({"schema_version": 1})
    calls = client.calls

    summary = run(settings, client, store, IngestOptions(rebuild=True))

    assert client.calls == calls
    assert summary.embedded_cached == summary.chunks == 2 and len(summary.unchanged) == 0
    assert collection.info(store).schema_version == SCHEMA_VERSION
    after = stored_vectors(store, list(before))
    assert all(after[p] == pytest.approx(before[p], abs=1e-6) for p in before)


def test_a_redropped_note_with_one_paragraph_edited_embeds_only_the_changed_chunks(
    settings, client, store
):
    paras = paragraphs(20)
    write(settings.NOTES_DIR / "walks.md", "# Walks\n\n" + "\n\n".join(paras) + "\n")
    first = run(settings, client, store)
    assert first.chunks >= 20
    paras[7] = paras[7].replace("glacier", "moraine")
    write(settings.NOTES_DIR / "walks.md", "# Walks\n\n" + "\n\n".join(paras) + "\n")
    calls = client.calls

    summary = run(settings, client, store)

    assert summary.replaced == ["walks.md"]
    assert client.calls == calls + 1
    assert summary.chunks - summary.embedded_cached <= 1
    texts = [p["text"] for _, p in store.payloads("walks.md")]
    assert sum("moraine" in t for t in texts) == 1


def test_cached_vectors_survive_a_new_process_and_a_lost_collection(
    settings, client, store, embedder_transport
):
    write(settings.NOTES_DIR / "shock.md", SHOCK)
    run(settings, client, store)
    collection.drop(store)  # e.g. the Qdrant volume was deleted
    calls = client.calls
    with embed_client(
        settings, transport=embedder_transport
    ) as fresh_client:  # a later run: new client, new cache
        summary = run(settings, fresh_client, store)
        assert fresh_client.calls == 0
    assert client.calls == calls
    assert summary.embedded_cached == 1
    assert count_points(store, "shock.md") == 1


def test_the_cache_can_be_turned_off(tmp_path: Path, embedder_transport):
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL, EMBED_CACHE=False)
    write(settings.NOTES_DIR / "bread.txt", BREAD)
    with (
        embed_client(settings, transport=embedder_transport) as client,
        open_store(settings) as store,
    ):
        run(settings, client, store)
        calls = client.calls
        collection.drop(store)
        run(settings, client, store)
        assert client.calls == calls + 1
    assert not (settings.STATE_DIR / CACHE_NAME).exists()


class _Counting:
    """A DocumentEmbedder that records what it was asked to embed (cache unit tests)."""

    def __init__(self, model: str = "m", dimensions: int = 3) -> None:
        self.model, self.dimensions, self.asked = model, dimensions, []

    def embed_documents(self, texts):
        self.asked.append(list(texts))
        return [[float(len(t)), 1.0, 0.5] for t in texts]


def test_repeated_texts_in_one_batch_are_embedded_once_and_order_is_kept(tmp_path: Path):
    embedder = _Counting()
    with EmbedCache(tmp_path / CACHE_NAME) as cache:
        vectors = cache.embed_documents(embedder, ["aa", "b", "aa"])
    assert embedder.asked == [["aa", "b"]]
    assert vectors == [[2.0, 1.0, 0.5], [1.0, 1.0, 0.5], [2.0, 1.0, 0.5]]


def test_another_model_or_dimension_never_reuses_a_vector(tmp_path: Path):
    assert content_key("a", 384, "text") != content_key("b", 384, "text")
    assert content_key("a", 384, "text") != content_key("a", 256, "text")
    with EmbedCache(tmp_path / CACHE_NAME) as cache:
        cache.embed_documents(_Counting("a"), ["text"])
        other = _Counting("b")
        cache.embed_documents(other, ["text"])
    assert other.asked == [["text"]]
