"""kb.search.domains.fuse: reciprocal rank fusion of result lists from two collections."""

from __future__ import annotations

from kb.core.schema import Hit
from kb.search.domains import RRF_K, fuse


def hits(domain: str, scores: list[float]) -> list[Hit]:
    return [
        Hit(text=f"{domain} {i}", source=f"{domain}{i}.x", score=s, chunk_index=0, domain=domain)
        for i, s in enumerate(scores)
    ]


def test_lists_are_merged_by_rank_whatever_their_score_scales():
    prose = hits("prose", [0.9, 0.8, 0.7])
    code = hits("code", [40.0, 20.0, 10.0])  # another model, another scale
    fused = fuse([prose, code], 6)
    # rank by rank, each pair in the order of how far each hit stands above its own list
    assert [h.source for h in fused] == [
        "code0.x", "prose0.x", "prose1.x", "code1.x", "code2.x", "prose2.x"
    ]  # fmt: skip
    assert [h.score for h in fused[:2]] == [round(1 / (RRF_K + 1), 6)] * 2
    assert len(fuse([prose, code], 3)) == 3


def test_the_list_whose_top_hit_stands_out_goes_first():
    sure_code = hits("code", [0.9, 0.3, 0.25, 0.2])
    flat_prose = hits("prose", [0.41, 0.40, 0.39, 0.38])
    assert fuse([flat_prose, sure_code], 2)[0].domain == "code"
    sure_prose = hits("prose", [0.9, 0.3, 0.25, 0.2])
    flat_code = hits("code", [0.41, 0.40, 0.39, 0.38])
    assert fuse([sure_prose, flat_code], 2)[0].domain == "prose"


def test_a_hit_in_both_lists_adds_up_and_is_returned_once():
    one = hits("prose", [0.9, 0.5])
    fused = fuse([one, one[::-1]], 5)
    both = round(1 / (RRF_K + 1) + 1 / (RRF_K + 2), 6)
    assert len(fused) == 2 and [h.score for h in fused] == [both, both]
