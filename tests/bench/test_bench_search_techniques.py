"""bench/search_techniques.py: each technique of issue 51 replayed beside hybrid search without
it, judged by its worst cell, and the replay without one agrees with hybrid search through
Qdrant (or the run fails)."""

from __future__ import annotations

from helpers import bench_json

from bench import search_techniques as techniques


def test_a_technique_is_kept_only_when_its_worst_cell_rises_and_no_cell_falls_past_noise():
    def cells(a: float, b: float) -> dict[str, dict[str, float]]:
        return {"x": {"all": a, "paraphrase": b}}

    table = {
        "keyword": cells(0.5, 0.5),
        "semantic": cells(0.8, 0.9),
        "rrf k=60 (Qdrant)": cells(0.7, 0.7),
        "hybrid (before)": cells(0.85, 0.80),
        "a: question words": cells(0.86, 0.85),  # worst cell up, nothing down: kept
        "b: lead prior": cells(0.80, 0.89),  # worst cell up but `all` falls 0.05: not kept
        "c: note card": cells(0.85, 0.80),  # unchanged: not kept
    }
    judged = techniques.verdicts(table, ["hybrid (before)", *list(table)[4:]])
    assert [name for name, v in judged.items() if v["kept"]] == ["a: question words"]
    assert judged["b: lead prior"]["drop_cell"] == "x/all"


def test_every_technique_is_replayed_and_the_replay_without_one_matches_hybrid_search(
    embedder_url: str,
):
    out, result = bench_json("search_techniques.py", embedder_url, "--only", "notes")
    assert set(result["verdicts"]) == set(techniques.TECHNIQUES)
    table = result["ndcg@10"]
    assert table["hybrid search"]["notes"] == table["hybrid (before)"]["notes"]
    assert "largest drop" in out
