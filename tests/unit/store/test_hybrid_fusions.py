"""kb.store.query's fusions (the hybrid `bonus` and the references bench/retrieval.py measures
it against) rank alike on Qdrant's engine in-process and through the server's engine
(kb.store.server) on qdrant-client's in-process implementation of a server's API."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from ingest_fixtures import make_settings
from qdrant_client import QdrantClient, models

from kb.app.backend import open_store
from kb.core.schema import point_id
from kb.embedding.keywords import document_vector, query_vector
from kb.search.query import search
from kb.store import collection
from kb.store.points import Point, Store
from kb.store.query import FUSIONS, HYBRID_FUSION, fused
from kb.store.server import ServerEngine

DIMS = 4
WORDS = ["alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "zeta", "theta"]


def random_points(rng: random.Random) -> list[Point]:
    """Chunks of distinct lengths, so no two keyword scores tie (engines rank ties apart
    differently, and rank fusion would carry that into its scores)."""
    points = []
    lengths = iter(rng.sample(range(3, 200), 120))
    for n in range(30):
        source = f"n{n}.md"
        for i in range(rng.randint(1, 4)):
            text = " ".join(rng.choice(WORDS) for _ in range(next(lengths)))
            dense = [rng.uniform(-1, 1) for _ in range(DIMS)]
            payload = {"source": source, "chunk_index": i}
            points.append(Point(point_id(source, i), dense, payload, document_vector(text)))
    return points


def opened(tmp_path: Path, engine: str, points: list[Point]) -> Store:
    if engine == "edge":
        (tmp_path / engine).mkdir()
        store = open_store(make_settings(tmp_path / engine))
    else:
        store = Store(ServerEngine(QdrantClient(location=":memory:"), "in-process"), "notes")
    collection.create(store, "model-a", DIMS)
    store.replace(points, sorted({str(p.payload["source"]) for p in points}))
    return store


@pytest.mark.parametrize("fusion", FUSIONS)
def test_each_fusion_ranks_alike_on_the_embedded_engine_and_as_a_server_does(
    tmp_path: Path, fusion: str
) -> None:
    rng = random.Random(11)
    points = random_points(rng)
    edge, server = opened(tmp_path, "edge", points), opened(tmp_path, "server", points)
    try:
        for _ in range(8):
            dense = [rng.uniform(-1, 1) for _ in range(DIMS)]
            keyword = query_vector(" ".join(rng.sample(WORDS, 3)))
            for per_note in (None, 1):
                found = [
                    [
                        (round(h.score, 5), h.source, h.chunk_index)
                        for h in store.query(
                            8, dense=dense, keyword=keyword, per_note=per_note, fusion=fusion
                        )
                    ]
                    for store in (edge, server)
                ]
                ours, theirs = found
                assert [s for s, *_ in ours] == pytest.approx([s for s, *_ in theirs], abs=1e-4)
                # equal scores may come in either order, and engines break a tie at the cut
                # differently: the same scores, the same chunks above the cut
                cut = ours[-1][0] + 1e-4
                assert sorted(h[1:] for h in ours if h[0] > cut) == sorted(
                    h[1:] for h in theirs if h[0] > cut
                )
    finally:
        edge.close()
        server.close()


def assert_reference_top(
    tmp_path: Path, points: list[Point], top2: list[str], score: float
) -> None:
    """On both engines, three times over: the reference RRF's two best for the dense query
    [1, 0, 0, 0] and the keyword `zebra` are `top2`, both scoring `score`."""
    for engine in ("edge", "server"):
        store = opened(tmp_path, engine, points)
        try:
            for _ in range(3):
                top = store.query(2, dense=[1.0, 0, 0, 0], keyword=query_vector("zebra"),
                                  fusion="rrf")  # fmt: skip
                assert [h.source for h in top] == top2, engine
                assert [h.score for h in top] == pytest.approx([score, score], rel=1e-4)
        finally:
            store.close()


def test_the_reference_rrf_scores_one_over_sixty_plus_the_rank_and_breaks_ties_dense_first(
    tmp_path: Path,
) -> None:
    # a.md: first by meaning, no keyword; b.md: the only keyword match, last of 120 by meaning
    # (beyond the dense prefetch). Plain RRF ties them at 1 / 61, which an engine orders at
    # random; the reference puts the dense one first.
    rng = random.Random(3)
    points = [
        Point(point_id(f"n{i}.md", 0), [0.5, rng.uniform(0, 1), rng.uniform(0, 1), 0.1],
              {"source": f"n{i}.md"}, document_vector("lion"))
        for i in range(118)
    ]  # fmt: skip
    points += [
        Point(point_id("a.md", 0), [1.0, 0, 0, 0], {"source": "a.md"}, document_vector("lion")),
        Point(point_id("b.md", 0), [-1.0, 0, 0, 0], {"source": "b.md"}, document_vector("zebra")),
    ]
    assert_reference_top(tmp_path, points, ["a.md", "b.md"], 1 / 61)


def test_the_reference_rrf_breaks_a_tie_of_points_both_rankings_found_keyword_first(
    tmp_path: Path,
) -> None:
    # a.md: first by meaning, second by keyword; b.md: second by meaning, first by keyword.
    # Both score 1/61 + 1/62; the keyword weight a hair below 1 scales the keyword ranks, so the
    # one the keyword ranking placed first wins (kb.store.query.REFERENCE_RRF_WEIGHTS).
    points = [
        Point(point_id("a.md", 0), [1.0, 0, 0, 0], {"source": "a.md"},
              document_vector("zebra and a long tail of other words here")),
        Point(point_id("b.md", 0), [0.8, 0.6, 0, 0], {"source": "b.md"},
              document_vector("zebra zebra")),
        Point(point_id("c.md", 0), [0, 1.0, 0, 0], {"source": "c.md"}, document_vector("lion")),
    ]  # fmt: skip
    assert_reference_top(tmp_path, points, ["b.md", "a.md"], 1 / 61 + 1 / 62)


def test_hybrid_search_uses_the_bonus_formula_and_refuses_an_unknown_fusion() -> None:
    assert HYBRID_FUSION == "bonus"
    assert isinstance(fused(HYBRID_FUSION, query_vector("a b c")), models.FormulaQuery)
    with pytest.raises(ValueError, match="fusion must be one of bonus, rrf, dbsf"):
        fused("max", query_vector("a"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fusion must be one of"):
        search(None, None, "anything", fusion="max")  # type: ignore[arg-type]


@pytest.mark.parametrize("engine", ["edge", "server"])
def test_hybrid_search_ranks_a_note_by_its_best_meaning_plus_its_best_keyword_match(
    tmp_path: Path, engine: str
) -> None:
    # a.md: one chunk on the query's meaning without its word, another full of the word but far
    # in meaning; b.md: one chunk fairly close holding the word once. b's chunk beats each of
    # a's alone (cosine 0.8 plus its bonus), but a's best meaning plus its best words beat it.
    points = [
        Point(point_id("a.md", 0), [1.0, 0, 0, 0], {"source": "a.md", "chunk_index": 0},
              document_vector("the meaning in other terms")),
        Point(point_id("a.md", 1), [0, 1.0, 0, 0], {"source": "a.md", "chunk_index": 1},
              document_vector("kappa kappa kappa")),
        Point(point_id("b.md", 0), [0.8, 0.6, 0, 0], {"source": "b.md", "chunk_index": 0},
              document_vector("kappa sigma omega")),
    ]  # fmt: skip
    points += [
        Point(point_id(f"n{i}.md", 0), [0, 0, 1.0, 0], {"source": f"n{i}.md", "chunk_index": 0},
              document_vector("sigma omega zeta"))
        for i in range(20)
    ]  # fmt: skip
    store = opened(tmp_path, engine, points)
    try:
        dense, keyword = [1.0, 0, 0, 0], query_vector("kappa")
        chunks = store.query(3, dense=dense, keyword=keyword)
        assert [(h.source, h.chunk_index) for h in chunks] == [
            ("b.md", 0),
            ("a.md", 0),
            ("a.md", 1),
        ]
        notes = store.query(2, dense=dense, keyword=keyword, per_note=1)
        assert [(h.source, h.chunk_index) for h in notes] == [("a.md", 0), ("b.md", 0)]
        # the note's score: its best cosine (chunk 0, no keyword) plus its best bonus (chunk 1,
        # cosine 0); the passage shown is still its best chunk by both
        assert notes[0].score == pytest.approx(chunks[1].score + chunks[2].score, abs=1e-5)
        assert notes[1].score == pytest.approx(chunks[0].score, abs=1e-5)
    finally:
        store.close()
