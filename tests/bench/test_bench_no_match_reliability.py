"""bench/no_match.py's reliability figures (issue 51): results per confidence bucket against the
share judged relevant, and `no_good_match` judged against searches with no relevant result among
the k, a missed search included. Pure functions over labelled rows: no model, no store."""

from __future__ import annotations

from bench import no_match
from kb.search import confidence as calibrated

# confidence = sigmoid(bonus * 10 - 5): bonus 1 -> 0.9933, 0.5 -> 0.5, 0 -> 0.0067
FIT = calibrated.Calibration(bias=-5.0, cosine=0.0, standing=0.0, bonus=10.0, no_match_below=0.3)


def row(query: str, relevant: bool, bonus: float, *, written_empty: bool = False) -> no_match.Row:
    return no_match.Row("c", query, written_empty, relevant, 0.0, 0.0, bonus)


def test_reliability_counts_results_per_bucket_against_the_share_judged_relevant() -> None:
    rows = [row("q1", True, 1.0), row("q1", False, 1.0), row("q2", True, 1.0),
            row("q2", False, 0.5), row("q3", False, 0.0)]  # fmt: skip
    table = {label: (n, share) for label, n, _, share in
             no_match.reliability(no_match.confidences(rows, FIT))}  # fmt: skip
    assert table["0.8-1.0"] == (3, 2 / 3)  # three shown at >= 0.8, two of them relevant
    assert table["0.4-0.6"] == (1, 0.0) and table["0.0-0.2"] == (1, 0.0)
    assert table["0.2-0.4"][0] == 0 and table["0.6-0.8"][0] == 0


def test_a_search_that_missed_every_relevant_note_counts_as_one_with_no_good_match() -> None:
    rows = [
        row("covered", True, 1.0),
        row("missed", False, 0.0),  # a judged query whose results hold no relevant note
        row("uncovered", False, 0.0, written_empty=True),
        row("confident miss", False, 1.0),  # none relevant, yet confident: not flagged
    ]
    per_query = no_match.best_per_query(rows, FIT)
    assert {q for q, (empty, _) in per_query.items() if empty} == {
        "missed",
        "uncovered",
        "confident miss",
    }
    scores = no_match.flag_scores(per_query, FIT.no_match_below)
    assert scores["precision"] == 1.0 and scores["recall"] == 2 / 3
    assert scores["found_flagged"] == 0.0
