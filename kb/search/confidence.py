"""A calibrated `confidence` per result and `no_good_match` for a whole search, so an assistant
can say "your notes don't cover this" instead of citing the least bad passage.

A result's confidence is a logistic function of three signals read from the semantic and the
keyword ranking of the query (kb.search.explain.rankings): its cosine similarity, how far that
stands above the other passages' (a z-score within the ranking: a passage that stands out is a
match, a flat ranking is noise) and its keyword bonus (BM25 saturated per query term, as hybrid
search scores it). The weights were fitted by bench/no_match.py on the development collections,
with queries written to have no relevant note among them (bench/results/no-match.md gives the
fit, the cross-validated precision and recall of the flag, the reliability table (results per
confidence bucket against the share judged relevant: of results at >= 0.8, 92 % were relevant,
held out) and how to refit for another model).

Cosine scales differ between embedding models, so `CALIBRATIONS` keeps one fit per model family
(matched by a substring of the served model's name) and a fallback fitted without the cosine,
which only compares a passage with its own ranking. A search is `no_good_match` when no result
reaches `no_match_below`, chosen for searches with no relevant result among the k (a question the
notes do not cover, or one the search missed).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from kb.core.schema import Hit
from kb.search.explain import Rankings
from kb.store.query import KEYWORD_HALF


@dataclass(frozen=True)
class Calibration:
    """confidence = sigmoid(bias + cosine * w_cosine + standing * w_standing + bonus * w_bonus)"""

    bias: float
    cosine: float
    standing: float
    bonus: float
    no_match_below: float  # a search whose best confidence is below this has no good match


# Fitted by `uv run bench/no_match.py` (bench/results/no-match.md); the first whose key is in the
# served model's name applies, "" (without the cosine) for any other model.
# fmt: off
CALIBRATIONS: dict[str, Calibration] = {
    "minilm": Calibration(bias=-6.337, cosine=5.701, standing=0.486, bonus=14.922,
                          no_match_below=0.2),
    "": Calibration(bias=-5.154, cosine=0.0, standing=0.856, bonus=15.529, no_match_below=0.17),
}
# fmt: on


def calibration(model: str) -> Calibration:
    name = model.lower()
    for part, fitted in CALIBRATIONS.items():
        if part and part in name:
            return fitted
    return CALIBRATIONS[""]


@dataclass(frozen=True)
class Signals:
    cosine: float
    standing: float
    bonus: float


def signals(hit: Hit, ranks: Rankings) -> Signals | None:
    """The three signals of `hit`, None when the semantic ranking could not run."""
    semantic = ranks.semantic
    if semantic.missing or not semantic.hits:
        return None
    scores = semantic.scores
    _, cosine = semantic.place(hit)
    if cosine is None:  # below the ranking's depth: no closer than its last passage
        cosine = min(scores)
    mean = statistics.fmean(scores)
    spread = statistics.pstdev(scores) if len(scores) > 1 else 0.0
    standing = (cosine - mean) / spread if spread > 0 else 0.0
    _, bm25 = ranks.keyword.place(hit)
    bonus = bm25 / (bm25 + KEYWORD_HALF * max(ranks.terms, 1)) if bm25 else 0.0
    return Signals(cosine, standing, bonus)


def confidence(found: Signals, fitted: Calibration) -> float:
    z = (
        fitted.bias
        + fitted.cosine * found.cosine
        + fitted.standing * found.standing
        + fitted.bonus * found.bonus
    )
    return round(1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z)))), 4)


def no_good_match(confidences: Sequence[float | None], fitted: Calibration) -> bool | None:
    """True when no result reaches the threshold (or there is none); None when unknown."""
    known = [c for c in confidences if c is not None]
    if not confidences:
        return True
    if not known:
        return None
    return max(known) < fitted.no_match_below
