import dataclasses
import inspect
import random
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import free_port
from ingest_fixtures import count_points, in_process_qdrant, make_settings
from pydantic import ValidationError
from qdrant_client import QdrantClient, models

from kb.app.backend import open_store
from kb.core.errors import CollectionMissing, KeywordIndexMissing, ModelMismatch, StoreUnavailable
from kb.core.schema import DELETED_MARK, DENSE, KEYWORD, PAYLOAD_INDEXES, folders_of, point_id
from kb.core.settings import Settings
from kb.embedding.keywords import document_vector, query_vector
from kb.ingest import switch
from kb.store import collection
from kb.store.edge import EdgeEngine
from kb.store.points import Point, Store
from kb.store.query import (
    KEYWORD_HALF,
    KEYWORD_WEIGHT,
    LOOKUP_WEIGHT,
    DateRange,
    payload_filter,
)
from kb.store.server import ServerEngine

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


# every store test runs on both engines: embedded storage (Qdrant's engine in-process,
# kb.store.edge) and a server's (kb.store.server), here answered by qdrant-client's in-process
# implementation of the server's API
@pytest.fixture(params=["embedded", "server"])
def settings(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    if request.param == "embedded":
        return make_settings(tmp_path)
    url = in_process_qdrant(monkeypatch, tmp_path / "server")
    return make_settings(tmp_path, QDRANT_PATH="", QDRANT_URL=url)


def recording(monkeypatch: pytest.MonkeyPatch, method: str) -> list[dict[str, object]]:
    """The arguments each call of engine method `method` gets (on either engine)."""
    calls: list[dict[str, object]] = []
    for engine in (EdgeEngine, ServerEngine):
        real = getattr(engine, method)

        def record(*args, _real=real, **kwargs):
            calls.append(dict(inspect.signature(_real).bind(*args, **kwargs).arguments))
            return _real(*args, **kwargs)

        monkeypatch.setattr(engine, method, record)
    return calls


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    with open_store(settings) as opened:
        collection.create(opened, "model-a", DIMS)
        yield opened


def test_collection_records_the_model_and_dimension_that_made_it(store: Store):
    info = collection.info(store)
    assert info is not None
    assert (info.model, info.dimensions, info.points) == ("model-a", DIMS, 0)
    assert not info.rebuild_incomplete


def test_collection_and_points_survive_closing_and_reopening(settings: Settings, store: Store):
    store.replace(points_for("a.md", 3), ["a.md"])
    store.close()
    with open_store(settings) as again:
        assert collection.info(again).model == "model-a"
        assert count_points(again) == 3


@pytest.mark.parametrize(("model", "dims"), [("model-b", DIMS), ("model-a", 8)])
def test_another_model_or_dimension_is_refused_with_a_rebuild_hint(store: Store, model, dims):
    with pytest.raises(ModelMismatch) as caught:
        collection.check_model(store, model, dims)
    message = str(caught.value)
    assert "model-a (4-d)" in message and f"{model} ({dims}-d)" in message
    assert "`uv run ingest.py` rebuilds it" in message and "EMBED_PREVIOUS_MODEL" in message


def test_a_rebuilt_collection_takes_the_name_by_alias_and_the_old_one_is_deleted(store: Store):
    store.replace(points_for("a.md", 2), ["a.md"])
    for model in ("model-b", "model-c"):  # a collection's name first, then an alias's
        build = store.beside(f"notes--{model}")
        collection.create(build, model, DIMS, rebuilding=True, metadata={"switch_of": "notes"})
        build.replace(points_for("b.md", 3), ["b.md"])
        assert switch.finish(store, build)
        assert store.target() == build.collection
        assert store.collection_names() == [build.collection]
        info = collection.require(store)
        assert (info.model, info.points, info.switch_of) == (model, 3, None)
        assert not info.rebuild_incomplete
    assert collection.drop(store) and store.collection_names() == []


def test_point_ids_are_deterministic_so_rewriting_a_note_never_duplicates(store: Store):
    assert point_id("a.md", 0) == point_id("a.md", 0)
    assert len({point_id("a.md", 0), point_id("a.md", 1), point_id("b.md", 0)}) == 3
    for _ in range(3):
        store.replace(points_for("a.md", 4), ["a.md"])
    assert count_points(store) == 4


def test_replacing_a_note_removes_its_stale_chunks_and_leaves_other_notes_alone(store: Store):
    store.replace(points_for("a.md", 5) + points_for("b.md", 2), ["a.md", "b.md"])
    store.replace(points_for("a.md", 2), ["a.md"])
    assert count_points(store, "a.md") == 2
    assert count_points(store, "b.md") == 2
    assert sorted(p["chunk_index"] for _, p in store.payloads("a.md")) == [0, 1]


def test_deleting_a_source_removes_all_its_points(store: Store):
    store.replace(points_for("a.md", 3) + points_for("b.md", 1), ["a.md", "b.md"])
    store.delete_sources(["a.md"])
    assert (count_points(store, "a.md"), count_points(store)) == (0, 1)


def test_fingerprints_and_deletes_cover_more_notes_than_one_filter_names(
    store: Store, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("kb.store.points.FILTER_BATCH", 2)  # five notes: three filters each
    names = [f"n{i}.md" for i in range(5)]
    points = [p for name in names for p in points_for(name, 2)]
    for p in points[:4]:
        p.payload["note_hash"] = f"hash-{p.payload['source']}"
    store.replace(points, [])

    found = store.fingerprints(names[1:])

    assert sorted(found) == names[1:]
    assert found["n1.md"] == {
        point_id("n1.md", 0): "hash-n1.md",
        point_id("n1.md", 1): "hash-n1.md",
    }
    assert found["n2.md"] == {point_id("n2.md", i): "" for i in range(2)}  # written without one
    assert store.fingerprints() == store.fingerprints(names)
    store.delete_sources(names[:4])
    assert sorted(store.fingerprints()) == ["n4.md"]


def test_query_returns_nearest_first_and_a_tag_filter_keeps_notes_with_any_tag(store: Store):
    store.replace(
        points_for("a.md", 1, ["x"]) + points_for("b.md", 1, ["y", "z"]) + points_for("c.md", 1),
        ["a.md", "b.md", "c.md"],
    )
    store.replace([Point(point_id("d.md", 0), vec(0, 0, 0, 1), {"source": "d.md"})], ["d.md"])
    matches = store.query(4, dense=vec(0, 0, 0, 1))
    assert matches[0].source == "d.md"
    assert matches[0].score == pytest.approx(1.0)
    where = payload_filter(tags_any=["z", "x"])
    found = {m.source for m in store.query(10, dense=vec(1, 0, 0.1), where=where)}
    assert found == {"a.md", "b.md"}


def test_tag_counts_count_notes_not_chunks(store: Store):
    store.replace(
        points_for("a.md", 5, ["x", "y"]) + points_for("b.md", 2, ["x"]), ["a.md", "b.md"]
    )
    assert store.tag_counts() == [("x", 2), ("y", 1)]


def test_payload_indexes_are_created_for_every_filtered_field(settings: Settings, monkeypatch):
    # a server needs payload indexes to filter and facet: record what is asked for
    with open_store(settings, "indexed") as store:
        calls = recording(monkeypatch, "create_index")
        collection.create(store, "model-a", DIMS)
    requested = {call["field"]: call["kind"] for call in calls}
    assert requested == PAYLOAD_INDEXES
    assert {"source", "folders", "tags", "document_date", "date_ingested"} <= set(requested)
    assert PAYLOAD_INDEXES["tags"] == "keyword" and PAYLOAD_INDEXES["document_date"] == "datetime"


def test_a_new_collection_asks_for_the_shards_and_replicas_the_settings_give(
    settings: Settings, monkeypatch
):
    # a cluster spreads the collection so; embedded storage accepts and ignores them
    clustered = settings.model_copy(
        update={"QDRANT_SHARDS": 3, "QDRANT_REPLICATION": 2, "QDRANT_WRITE_CONSISTENCY": 2}
    )
    with open_store(clustered, "clustered") as store:
        asked = recording(monkeypatch, "create")
        sent = recorded_client_calls(monkeypatch, "create_collection")
        collection.create(store, "model-a", DIMS)
        assert collection.info(store).model == "model-a"
    [layout] = [call["cluster"] for call in asked]
    assert (layout.shards, layout.replicas) == (3, 2)
    assert layout.write_consistency == 2
    # the server's engine sends them on as Qdrant's own parameters
    assert len(sent) == (0 if store.embedded else 1)
    for kwargs in sent:
        assert (kwargs["shard_number"], kwargs["replication_factor"]) == (3, 2)
        assert kwargs["write_consistency_factor"] == 2


def recorded_client_calls(monkeypatch: pytest.MonkeyPatch, method: str) -> list[dict[str, object]]:
    """The keyword arguments each call of qdrant-client's `method` gets."""
    calls: list[dict[str, object]] = []
    real = getattr(QdrantClient, method)

    def record(self, *args, **kwargs):
        calls.append(kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(QdrantClient, method, record)
    return calls


def test_collection_holds_a_named_dense_vector_and_an_idf_weighted_keyword_vector(store: Store):
    params = store.describe()
    assert set(params.dense) == {DENSE}
    assert params.dense[DENSE].size == DIMS
    assert set(params.sparse) == {KEYWORD}
    assert params.sparse[KEYWORD].modifier == models.Modifier.IDF
    assert collection.info(store).keyword


def test_a_point_stores_its_keyword_vector_beside_the_dense_one(store: Store):
    keyword = document_vector("call kb.store.points.upsert_points")
    store.replace([Point(point_id("a.md", 0), vec(1), {"source": "a.md"}, keyword)], ["a.md"])
    [(_, vectors)] = store.records([point_id("a.md", 0)], vectors=True).values()
    stored = vectors[KEYWORD]
    assert (stored.indices, stored.values) == (keyword.indices, pytest.approx(keyword.values))
    [match] = store.query(5, keyword=query_vector("upsert_points"))
    assert match.source == "a.md" and match.score > 0


def test_a_collection_made_without_keyword_vectors_refuses_keyword_search_with_a_rebuild_hint(
    settings: Settings,
):
    with open_store(settings, "old") as store:
        # what the previous version created: the dense vector only
        store.create_collection(
            dense={DENSE: models.VectorParams(size=DIMS, distance=models.Distance.COSINE)},
            sparse={},
            metadata={"embed_model": "model-a", "embed_dimensions": DIMS, "schema_version": 1},
        )
        store.replace([Point(point_id("a.md", 0), vec(1), {"source": "a.md"})], ["a.md"])
        assert not collection.info(store).keyword
        with pytest.raises(KeywordIndexMissing) as caught:
            collection.require_keyword(store)
        message = str(caught.value)
        assert "'old'" in message and "older version" in message and "--rebuild" in message
        # semantic search still works on it
        assert [m.source for m in store.query(5, dense=vec(1))] == ["a.md"]


def test_hybrid_score_is_the_cosine_plus_a_saturating_keyword_bonus(store: Store):
    # a.md is first by meaning, b.md the only one with the keyword, c.md in between
    texts = {"a.md": "nothing special", "b.md": "zebra crossing", "c.md": "quiet street"}
    dense = {"a.md": vec(1), "b.md": vec(0, 1), "c.md": vec(1, 1)}
    points = [
        Point(point_id(s, 0), dense[s], {"source": s, "tags": [s[0]]}, document_vector(t))
        for s, t in texts.items()
    ]
    store.replace(points, list(texts))
    [bm25] = store.query(3, keyword=query_vector("zebra"))
    assert bm25.source == "b.md" and bm25.score > 0
    both = {m.source: m.score for m in store.query(3, dense=vec(1), keyword=query_vector("zebra"))}
    bonus = KEYWORD_WEIGHT * bm25.score / (bm25.score + KEYWORD_HALF)
    assert both == {
        "a.md": pytest.approx(1.0),
        "c.md": pytest.approx(2**-0.5),
        "b.md": pytest.approx(0.0 + bonus),  # orthogonal: the keyword alone lifts it
    }
    # two query terms halve the weight of matching one of them
    two = store.query(3, dense=vec(1), keyword=query_vector("zebra giraffe"))
    assert {m.source: m.score for m in two}["b.md"] < bonus


def test_a_lookup_query_weighs_its_keyword_bonus_more_so_the_note_naming_it_comes_first(
    store: Store,
):
    # a.md is about tax rules and closest by meaning; b.md names the identifier, far by meaning
    # (beside twenty unrelated notes, so the identifier is rare: a high IDF, as in a real vault)
    texts = {"a.md": "which tax rule we chose", "b.md": "event TaxRuleChosen"}
    texts |= {f"n{i}.md": f"unrelated note {i}" for i in range(20)}
    dense = {"a.md": vec(1), "b.md": vec(1, 0.9)}
    points = [
        Point(point_id(s, 0), dense.get(s, vec(0, 0, 1)), {"source": s}, document_vector(t))
        for s, t in texts.items()
    ]
    store.replace(points, list(texts))
    keyword = query_vector("TaxRuleChosen")
    assert keyword.lookup
    bm25 = {m.source: m.score for m in store.query(2, keyword=keyword)}
    found = store.query(2, dense=vec(1), keyword=keyword)
    assert [m.source for m in found] == ["b.md", "a.md"]
    terms = keyword.words or len(keyword.indices)  # the bonus scales with the words typed
    for hit in found:
        cosine = 1.0 if hit.source == "a.md" else 1 / (1 + 0.9**2) ** 0.5
        bonus = bm25[hit.source] / (bm25[hit.source] + KEYWORD_HALF * terms)
        assert hit.score == pytest.approx(cosine + LOOKUP_WEIGHT * bonus, rel=1e-4)
        if hit.source == "b.md":  # at the prose weight the closer note would have stayed first
            assert cosine + KEYWORD_WEIGHT * bonus < 1.0 + KEYWORD_WEIGHT * (
                bm25["a.md"] / (bm25["a.md"] + KEYWORD_HALF * terms)
            )


def test_filters_hold_inside_each_prefetch_of_a_hybrid_query(store: Store):
    texts = {"a.md": "zebra", "b.md": "zebra zebra", "c.md": "quiet street"}
    points = [
        Point(point_id(s, 0), vec(1, n), {"source": s, "tags": [s[0]]}, document_vector(t))
        for n, (s, t) in enumerate(texts.items())
    ]
    store.replace(points, list(texts))
    where = payload_filter(tags_any=["a", "c"])
    found = store.query(3, dense=vec(0, 1), keyword=query_vector("zebra"), where=where)
    # b.md is a top match both ways (the keyword twice, and by meaning), yet kept out
    assert {m.source for m in found} == {"a.md", "c.md"}


def test_per_note_keeps_the_best_chunks_of_each_note_and_fills_the_limit_with_other_notes(
    store: Store,
):
    # a server groups with query_points_groups; embedded storage collapses one ranked query
    # a.md has five chunks all closer to the query than any chunk of b.md, c.md, d.md
    points = [
        Point(point_id("a.md", i), vec(1, 0.01 * i), {"source": "a.md", "chunk_index": i})
        for i in range(5)
    ] + [
        Point(point_id(s, 0), vec(1, 0.5 + n), {"source": s, "chunk_index": 0})
        for n, s in enumerate(["b.md", "c.md", "d.md"])
    ]
    store.replace(points, ["a.md", "b.md", "c.md", "d.md"])

    def ranked(**kwargs):
        return [(m.source, m.chunk_index) for m in store.query(**kwargs)]

    assert ranked(limit=4, dense=vec(1)) == [("a.md", i) for i in range(4)]
    assert ranked(limit=4, dense=vec(1), per_note=1) == [
        ("a.md", 0),
        ("b.md", 0),
        ("c.md", 0),
        ("d.md", 0),
    ]
    assert ranked(limit=4, dense=vec(1), per_note=2) == [
        ("a.md", 0),
        ("a.md", 1),
        ("b.md", 0),
        ("c.md", 0),
    ]
    hybrid = ranked(limit=3, dense=vec(1), keyword=query_vector("x"), per_note=1)
    assert hybrid == [("a.md", 0), ("b.md", 0), ("c.md", 0)]


def test_folders_of_lists_every_folder_above_a_note():
    assert folders_of("a/b/c.md") == ["a", "a/b"]
    assert folders_of("top.md") == []


def test_payload_filter_selects_notes_matching_every_condition_and_is_none_without_any(
    store: Store,
):
    assert payload_filter() is None
    day = datetime(2024, 3, 1, tzinfo=UTC)
    notes = {  # source -> (tags, document_date); each note but two fails exactly one condition
        "recipes/match.md": (["a", "c", "d"], "2024-03-01T12:00:00+00:00"),
        "recipes/deep/match.md": (["b", "c", "d", "e"], "2024-03-01T00:00:00+00:00"),
        "recipes/no-any-tag.md": (["c", "d"], "2024-03-01T12:00:00+00:00"),
        "recipes/one-all-tag.md": (["a", "c"], "2024-03-01T12:00:00+00:00"),
        "recipes/next-day.md": (["a", "c", "d"], "2024-03-02T00:00:00+00:00"),
        "recipes/undated.md": (["a", "c", "d"], None),
        "recipes-other/match.md": (["a", "c", "d"], "2024-03-01T12:00:00+00:00"),
        "other/recipes.md": (["a", "c", "d"], "2024-03-01T12:00:00+00:00"),
    }
    points = [
        Point(
            point_id(source, 0),
            vec(1.0, float(n)),
            {
                "source": source,
                "folders": folders_of(source),
                "chunk_index": 0,
                "tags": tags,
                "document_date": date,
            },
        )
        for n, (source, (tags, date)) in enumerate(notes.items())
    ]
    store.replace(points, list(notes))

    def selected(**conditions) -> set[str]:
        matches = store.query(20, dense=vec(1.0), where=payload_filter(**conditions))
        return {m.source for m in matches}

    all_of_them = {
        "tags_any": ["a", "b"],
        "tags_all": ["c", "d"],
        "dates": [DateRange("document_date", day, day + timedelta(days=1), end_exclusive=True)],
        "path": "recipes",
    }
    assert selected(**all_of_them) == {"recipes/match.md", "recipes/deep/match.md"}
    assert selected(**{**all_of_them, "path": "recipes/deep/match.md"}) == {"recipes/deep/match.md"}
    assert selected(tags_all=["e"]) == {"recipes/deep/match.md"}
    assert selected(path="other") == {"other/recipes.md"}
    assert len(selected()) == len(notes)


def test_an_interrupted_full_build_is_flagged_until_marked_complete(store: Store):
    collection.drop(store)
    collection.create(store, "model-a", DIMS, rebuilding=True)
    assert collection.info(store).rebuild_incomplete
    collection.mark_complete(store)
    assert not collection.info(store).rebuild_incomplete


def test_a_missing_collection_says_to_ingest_first(settings: Settings):
    with open_store(settings, "never_made") as store:
        assert collection.info(store) is None
        with pytest.raises(CollectionMissing, match=r"uv run ingest\.py"):
            collection.check_model(store, "model-a", DIMS)


def test_embedded_storage_held_by_another_process_gives_a_clear_error(tmp_path: Path):
    settings = make_settings(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys
                from kb.store.points import Store
                store = Store.open("notes", path={settings.QDRANT_PATH!r})
                print("holding", flush=True)
                sys.stdin.read()
                store.close()
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
            open_store(settings)
        assert settings.QDRANT_PATH in str(caught.value)
        assert "in use by another process" in str(caught.value)
        assert "MCP server" in str(caught.value)
    finally:
        holder.communicate("", timeout=30)


def test_an_unreachable_server_gives_a_clear_error_and_no_fallback(tmp_path: Path):
    url = f"http://127.0.0.1:{free_port()}"
    settings = make_settings(tmp_path, QDRANT_PATH="", QDRANT_URL=url)
    with pytest.raises(StoreUnavailable, match=f"Qdrant at {url} .* unreachable"):
        open_store(settings)
    assert not (tmp_path / "qdrant").exists()  # nothing fell back to embedded storage


def test_setting_both_a_server_url_and_an_embedded_path_is_refused(tmp_path: Path):
    with pytest.raises(ValidationError, match="QDRANT_URL or QDRANT_PATH, not both"):
        make_settings(tmp_path, QDRANT_URL="http://localhost:6333")


def test_grouping_and_collapsing_give_the_same_results_for_every_mode(store: Store):
    # Qdrant's grouped query (a server's, here qdrant-client's in-process implementation of it)
    # is the reference the grouped results of the store under test (embedded storage collapses
    # one ranked query) must match
    reference = Store(ServerEngine(QdrantClient(location=":memory:"), "reference"), "notes")
    collection.create(reference, "model-a", DIMS)
    rng = random.Random(5)
    words = ["alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "zeta"]
    points = []
    for n in range(25):
        source = f"n{n}.md"
        for i in range(rng.randint(1, 5)):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(2, 8)))
            dense = [rng.uniform(-1, 1) for _ in range(DIMS)]
            payload = {"source": source, "chunk_index": i, "tags": [str(n % 3)]}
            points.append(Point(point_id(source, i), dense, payload, document_vector(text)))
    store.replace(points, [f"n{n}.md" for n in range(25)])
    reference.replace(points, [f"n{n}.md" for n in range(25)])
    for trial in range(6):
        dense = [rng.uniform(-1, 1) for _ in range(DIMS)]
        keyword = query_vector(" ".join(rng.sample(words, 2)))
        where = payload_filter(tags_any=["1", "2"]) if trial % 2 else None
        for kwargs in (
            {"dense": dense},
            {"keyword": keyword},
            {"dense": dense, "keyword": keyword},
        ):
            for per_note in (1, 2):
                found = {}
                for embedded, searched in ((False, reference), (True, store)):
                    matches = searched.query(7, where=where, per_note=per_note, **kwargs)
                    # equal scores (BM25 ties) may come in either order, and engines break
                    # a tie at the cut differently: same scores, same chunks above the cut
                    found[embedded] = [
                        (round(m.score, 4), m.source, m.chunk_index) for m in matches
                    ]
                ours, theirs = found[True], found[False]
                assert [s for s, *_ in ours] == pytest.approx([s for s, *_ in theirs], abs=1e-4)
                cut = ours[-1][0]
                assert sorted(h for h in ours if h[0] > cut) == sorted(
                    h for h in theirs if h[0] > cut
                )
                assert len(ours) == 7
    reference.close()


def with_origin(points: list[Point], origin: str) -> list[Point]:
    return [dataclasses.replace(p, payload={**p.payload, "origin": origin}) for p in points]


def test_stored_notes_are_read_by_origin_and_older_points_without_one_count_as_the_inbox(
    store: Store,
):
    older = points_for("a.md", 2)  # written before the origin field existed
    inbox = with_origin(points_for("c.md", 1), "inbox")
    vault = with_origin(points_for("vault/b.md", 1), "vault")
    store.replace(older + inbox + vault, [])
    assert sorted(store.fingerprints(origin="inbox")) == ["a.md", "c.md"]
    assert sorted(store.fingerprints(origin="vault")) == ["vault/b.md"]


def test_a_soft_deleted_note_is_hidden_from_queries_and_tag_counts_until_restored(store: Store):
    store.replace(points_for("a.md", 2, ["x"]) + points_for("b.md", 1, ["x"]), [])
    store.soft_delete(["a.md"], "file_deleted", "2026-01-01T00:00:00+00:00")
    assert {m.source for m in store.query(10, dense=vec(1))} == {"b.md"}
    assert {m.source for m in store.query(10, dense=vec(1), per_note=1)} == {"b.md"}
    assert store.tag_counts() == [("x", 1)] and store.tag_counts(per="chunk") == [("x", 1)]
    assert all(h.startswith(DELETED_MARK) for h in store.fingerprints()["a.md"].values())
    assert count_points(store) == 3  # kept
    store.restore(["a.md"])
    assert {m.source for m in store.query(10, dense=vec(1))} == {"a.md", "b.md"}
    assert store.tag_counts() == [("x", 2)]
