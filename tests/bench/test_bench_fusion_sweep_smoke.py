"""bench/fusion_sweep.py on the notes corpus: every fusion family is replayed and ranked, and the
replay of the shipped formula agrees with hybrid search through Qdrant (or the run fails)."""

from __future__ import annotations

from helpers import bench_json

from bench import fusion_sweep as sweep


def test_the_sweep_ranks_every_fusion_and_its_replay_matches_hybrid_search(embedder_url: str):
    out, result = bench_json("fusion_sweep.py", embedder_url, "--only", "notes")
    assert set(result["margins"]) == {*sweep.families(), *sweep.MEASURED}
    table = result["ndcg@10"]
    assert set(table["hybrid search"]) == {"notes"}
    assert table["hybrid search"]["notes"] == table[sweep.SHIPPED]["notes"]
    # the references' margin against themselves is never positive, hybrid's is measured
    assert all(result["margins"][r]["worst"] <= 0 for r in sweep.REFERENCES)
    # issue 51's bar, plain RRF in every cell, is a column of its own: zero for RRF itself
    assert result["margins"][sweep.REFERENCES[-1]]["vs_rrf"] == 0
    assert all(m["vs_rrf"] >= m["worst"] for m in result["margins"].values())
    assert "worst margin" in out and "worst vs rrf" in out
