import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import free_port
from ingest_fixtures import make_settings
from pydantic import ValidationError

from kb.settings import Settings
from kb.store import (
    DENSE,
    PAYLOAD_INDEXES,
    CollectionMissing,
    ModelMismatch,
    Point,
    Store,
    StoreUnavailable,
    point_id,
)

DIMS = 4


def vec(*values: float) -> list[float]:
    return [*values, *([0.0] * (DIMS - len(values)))]


def points_for(source: str, n: int, tags: list[str] | None = None) -> list[Point]:
    return [
        Point(
            point_id(source, i),
            vec(1.0, float(i), 0.1),
            {"text": f"{source} chunk {i}", "source": source, "chunk_index": i, "tags": tags or []},
        )
        for i in range(n)
    ]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    with Store.open(settings) as opened:
        opened.ensure("model-a", DIMS)
        yield opened


def test_collection_records_the_model_and_dimension_that_made_it(store: Store):
    info = store.collection_model()
    assert info is not None
    assert (info.model, info.dimensions, info.points) == ("model-a", DIMS, 0)
    assert not info.rebuild_incomplete


def test_collection_and_points_survive_closing_and_reopening(settings: Settings, store: Store):
    store.replace(points_for("a.md", 3), ["a.md"])
    store.close()
    with Store.open(settings) as again:
        assert again.collection_model().model == "model-a"
        assert again.count() == 3


@pytest.mark.parametrize(("model", "dims"), [("model-b", DIMS), ("model-a", 8)])
def test_another_model_or_dimension_is_refused_with_a_rebuild_hint(store: Store, model, dims):
    with pytest.raises(ModelMismatch) as caught:
        store.ensure(model, dims)
    message = str(caught.value)
    assert "model-a (4-d)" in message and f"{model} ({dims}-d)" in message
    assert "--rebuild" in message


def test_point_ids_are_deterministic_so_rewriting_a_note_never_duplicates(store: Store):
    assert point_id("a.md", 0) == point_id("a.md", 0)
    assert len({point_id("a.md", 0), point_id("a.md", 1), point_id("b.md", 0)}) == 3
    for _ in range(3):
        store.replace(points_for("a.md", 4), ["a.md"])
    assert store.count() == 4


def test_replacing_a_note_removes_its_stale_chunks_and_leaves_other_notes_alone(store: Store):
    store.replace(points_for("a.md", 5) + points_for("b.md", 2), ["a.md", "b.md"])
    store.replace(points_for("a.md", 2), ["a.md"])
    assert store.count("a.md") == 2
    assert store.count("b.md") == 2
    assert sorted(p["chunk_index"] for _, p in store.payloads("a.md")) == [0, 1]


def test_deleting_a_source_removes_all_its_points(store: Store):
    store.replace(points_for("a.md", 3) + points_for("b.md", 1), ["a.md", "b.md"])
    store.delete_source("a.md")
    assert (store.count("a.md"), store.count()) == (0, 1)


def test_query_returns_nearest_first_and_a_tag_filter_keeps_notes_with_any_tag(store: Store):
    store.replace(
        points_for("a.md", 1, ["x"]) + points_for("b.md", 1, ["y", "z"]) + points_for("c.md", 1),
        ["a.md", "b.md", "c.md"],
    )
    store.replace([Point(point_id("d.md", 0), vec(0, 0, 0, 1), {"source": "d.md"})], ["d.md"])
    matches = store.query(vec(0, 0, 0, 1), 4)
    assert matches[0].payload["source"] == "d.md"
    assert matches[0].score == pytest.approx(1.0)
    found = {m.payload["source"] for m in store.query(vec(1, 0, 0.1), 10, tags=["z", "x"])}
    assert found == {"a.md", "b.md"}


def test_tag_counts_count_notes_not_chunks(store: Store):
    store.replace(
        points_for("a.md", 5, ["x", "y"]) + points_for("b.md", 2, ["x"]), ["a.md", "b.md"]
    )
    assert store.tag_counts() == [("x", 2), ("y", 1)]


def test_payload_indexes_are_created_for_every_filtered_field(settings: Settings, monkeypatch):
    # embedded Qdrant ignores payload indexes but a server needs them: record what is asked for
    requested: dict[str, object] = {}
    with Store.open(settings, "indexed") as store:
        real = store.client.create_payload_index

        def recording(collection_name, field_name, field_schema=None, **kwargs):
            requested[field_name] = field_schema
            return real(collection_name, field_name, field_schema=field_schema, **kwargs)

        monkeypatch.setattr(store.client, "create_payload_index", recording)
        store.ensure("model-a", DIMS)
    assert requested == PAYLOAD_INDEXES
    assert {"source", "tags", "document_date", "date_ingested"} <= set(requested)
    assert PAYLOAD_INDEXES["tags"] == "keyword" and PAYLOAD_INDEXES["document_date"] == "datetime"


def test_collection_uses_a_named_dense_vector_so_other_vectors_can_join_it(store: Store):
    vectors = store.client.get_collection(store.collection).config.params.vectors
    assert set(vectors) == {DENSE}
    assert vectors[DENSE].size == DIMS


def test_an_interrupted_full_build_is_flagged_until_marked_complete(store: Store):
    store.drop()
    store.create("model-a", DIMS, rebuilding=True)
    assert store.collection_model().rebuild_incomplete
    store.mark_complete()
    assert not store.collection_model().rebuild_incomplete


def test_a_missing_collection_says_to_ingest_first(settings: Settings):
    with Store.open(settings, "never_made") as store:
        assert store.collection_model() is None
        with pytest.raises(CollectionMissing, match=r"uv run ingest\.py"):
            store.check_model("model-a", DIMS)


def test_embedded_storage_held_by_another_process_gives_a_clear_error(settings: Settings):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys
                from qdrant_client import QdrantClient
                client = QdrantClient(path={settings.QDRANT_PATH!r})
                print("holding", flush=True)
                sys.stdin.read()
                client.close()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(StoreUnavailable) as caught:
            Store.open(settings)
        assert settings.QDRANT_PATH in str(caught.value)
        assert "in use by another process" in str(caught.value)
        assert "MCP server" in str(caught.value)
    finally:
        holder.communicate("", timeout=30)


def test_an_unreachable_server_gives_a_clear_error_and_no_fallback(tmp_path: Path):
    url = f"http://127.0.0.1:{free_port()}"
    settings = make_settings(tmp_path, QDRANT_PATH="", QDRANT_URL=url)
    with pytest.raises(StoreUnavailable, match=f"Qdrant at {url} .* unreachable"):
        Store.open(settings)
    assert not (tmp_path / "qdrant").exists()  # nothing fell back to embedded storage


def test_setting_both_a_server_url_and_an_embedded_path_is_refused(tmp_path: Path):
    with pytest.raises(ValidationError, match="QDRANT_URL or QDRANT_PATH, not both"):
        make_settings(tmp_path, QDRANT_URL="http://localhost:6333")
