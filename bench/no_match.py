"""Calibrate `confidence` and the `no_good_match` flag (kb.search.confidence) on the development
collections, and measure the flag.

    uv run bench/no_match.py [--json]

Each collection of COLLECTIONS (the vault, the manual, the notes, the command pages) is copied,
ingested by the real ingest into embedded Qdrant and searched with its judged queries and its
no-match queries (`no_match.jsonl` beside its queries: written to have no relevant document in it),
hybrid, k=10, one result per note. Every result's signals (kb.search.confidence.signals: cosine,
standing, keyword bonus) are labelled relevant or not by the judgments, and a logistic regression
is fitted twice: with the cosine (for the model in use) and without it (the fallback for any other
model). The flag's threshold is the one maximising F0.5 of "no relevant result among the k" (a
query written to have none, or a judged one whose search missed) over all queries: precision counts
twice as much as recall, since a flag on a question the notes do answer makes the assistant tell
the user wrongly that their notes do not cover it.

Reported (bench/results/no-match.md): the fitted weights, then the flag's precision and recall
leave-one-collection-out (weights and threshold fitted on the other collections, measured on the
one left out: the honest figure) and in-sample; then the reliability of `confidence` held out (each
result's confidence from the fit on the other collections): results per confidence bucket against
the share judged relevant, and how often the flag fires on searches with no relevant result among
the k (a query written to have none, or a judged one the search missed). Needs numpy (the
embedder's stack brings it).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import REPO_ROOT, bench_settings, copy_notes, embedder, format_table
from bench.retrieval import load_queries, model_name
from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.search import confidence as calibrated
from kb.search import query as kb_query
from kb.search.explain import Rankings, ranking_searches, rankings
from kb.search.filters import Filters

DATASETS = REPO_ROOT / "bench" / "datasets"
COLLECTIONS = {
    "vault": (DATASETS / "vault" / "notes", DATASETS / "vault"),
    "manual": (DATASETS / "manual" / "docs", DATASETS / "manual"),
    "notes": (REPO_ROOT / "bench" / "notes_corpus" / "notes", REPO_ROOT / "bench" / "notes_corpus"),
    "commands": (DATASETS / "commands" / "pages", DATASETS / "commands"),
}
K = 10
BUCKETS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # the reliability table's confidence buckets
# the last bucket: of results shown at >= 0.8, at least 80 % should be relevant (issue 51)


@dataclass
class Row:
    collection: str
    query: str
    no_match: bool  # a query written to have no relevant note
    relevant: bool  # this result is judged relevant
    cosine: float
    standing: float
    bonus: float


def collect(name: str, docs: Path, folder: Path, url: str) -> list[Row]:
    """Every result of every query of one collection, with its signals and label."""
    judged = load_queries(folder / "queries.jsonl", docs)
    missing = load_queries(folder / "no_match.jsonl", docs, no_match=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="kb-bench-nomatch-") as tmp:
        notes = Path(tmp) / "notes"
        copy_notes(docs, notes)
        settings = bench_settings(notes, Path(tmp) / "qdrant", url)
        with open_store(settings) as store, embed_client(settings) as client:
            summary = run(settings, client, store)
            print(f"{name}: {len(summary.ingested)} notes, {summary.chunks} chunks",
                  file=sys.stderr)  # fmt: skip
            for query, empty in [(q, False) for q in judged] + [(q, True) for q in missing]:
                hits = kb_query.search(store, client, query.text, K, mode="hybrid")
                ranks = ranks_of(store, client, query.text)
                for hit in hits:
                    found = calibrated.signals(hit, ranks)
                    if found is None:
                        continue
                    relevant = not empty and (hit.source or "") in query.relevant
                    rows.append(Row(name, query.id, empty, relevant, found.cosine,
                                    found.standing, found.bonus))  # fmt: skip
    return rows


def ranks_of(store: Any, client: Any, text: str) -> Rankings:
    """The semantic and keyword rankings confidence reads, as kb.search.entry builds them."""
    semantic, keyword = ranking_searches(store, client, text, Filters(), 1)
    answers = iter(kb_query.send(store, [s for s in (semantic, keyword) if s is not None]))
    found = [None if s is None else next(answers).hits for s in (semantic, keyword)]
    return rankings(text, found[0], found[1])


def features(rows: Sequence[Row], cosine: bool) -> np.ndarray:
    cols = [[r.cosine for r in rows]] if cosine else []
    cols += [[r.standing for r in rows], [r.bonus for r in rows]]
    return np.array(cols, dtype=float).T


def fit(rows: Sequence[Row], cosine: bool) -> np.ndarray:
    """Logistic regression (bias first) by Newton's method, a little L2 on the weights."""
    x = np.hstack([np.ones((len(rows), 1)), features(rows, cosine)])
    y = np.array([1.0 if r.relevant else 0.0 for r in rows])
    w = np.zeros(x.shape[1])
    ridge = np.eye(x.shape[1]) * 1e-2
    ridge[0, 0] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-x @ w))
        gradient = x.T @ (p - y) + ridge @ w
        hessian = (x.T * (p * (1 - p))) @ x + ridge
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def calibration(w: np.ndarray, cosine: bool, threshold: float) -> calibrated.Calibration:
    parts = list(w[1:])
    return calibrated.Calibration(
        bias=round(float(w[0]), 3),
        cosine=round(float(parts.pop(0)), 3) if cosine else 0.0,
        standing=round(float(parts[0]), 3),
        bonus=round(float(parts[1]), 3),
        no_match_below=round(threshold, 3),
    )


def best_per_query(
    rows: Sequence[Row], fitted: calibrated.Calibration
) -> dict[str, tuple[bool, float]]:
    """(no relevant result among the k, best confidence) per query: a query written to have
    none, or a judged one whose search missed every relevant note."""
    out: dict[str, tuple[bool, float]] = {}
    for r in rows:
        sure = calibrated.confidence(calibrated.Signals(r.cosine, r.standing, r.bonus), fitted)
        empty, best = out.get(r.query, (True, 0.0))
        out[r.query] = (empty and not r.relevant, max(best, sure))
    return out


def flag_scores(per_query: dict[str, tuple[bool, float]], threshold: float) -> dict[str, float]:
    """Precision, recall and F1 of "no good match" (best confidence below `threshold`) against
    the searches with no relevant result among the k."""
    flagged = {q for q, (_, best) in per_query.items() if best < threshold}
    truth = {q for q, (empty, _) in per_query.items() if empty}
    hit = len(flagged & truth)
    precision = hit / len(flagged) if flagged else 1.0
    recall = hit / len(truth) if truth else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    f05 = 1.25 * precision * recall / (0.25 * precision + recall) if precision + recall else 0.0
    # searches that did find a relevant note but were flagged: the assistant would wrongly say
    # "not in your notes"
    found = [q for q, (empty, _) in per_query.items() if not empty]
    wrong = sum(1 for q in found if q in flagged) / len(found) if found else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "f0.5": f05,
        "found_flagged": wrong,
    }


def choose(rows: Sequence[Row], cosine: bool) -> calibrated.Calibration:
    """Weights fitted on `rows`, and the threshold maximising the flag's F0.5 on them."""
    w = fit(rows, cosine)
    trial = calibration(w, cosine, 0.5)
    per_query = best_per_query(rows, trial)
    grid = [i / 100 for i in range(1, 100)]
    best = max(grid, key=lambda t: (flag_scores(per_query, t)["f0.5"], -abs(t - 0.3)))
    return calibration(w, cosine, best)


def calibration_error(rows: Sequence[Row], fitted: calibrated.Calibration, bins: int = 10) -> float:
    """Expected calibration error: |mean confidence - share relevant| per bin, weighted."""
    pairs = [(calibrated.confidence(calibrated.Signals(r.cosine, r.standing, r.bonus), fitted),
              r.relevant) for r in rows]  # fmt: skip
    total = 0.0
    for b in range(bins):
        inside = [
            (c, y) for c, y in pairs if b / bins <= c < (b + 1) / bins or (b == bins - 1 and c == 1)
        ]
        if inside:
            mean = sum(c for c, _ in inside) / len(inside)
            share = sum(1 for _, y in inside if y) / len(inside)
            total += len(inside) / len(pairs) * abs(mean - share)
    return total


def confidences(rows: Sequence[Row], fitted: calibrated.Calibration) -> list[tuple[float, bool]]:
    return [(calibrated.confidence(calibrated.Signals(r.cosine, r.standing, r.bonus), fitted),
             r.relevant) for r in rows]  # fmt: skip


def held_out(rows: Sequence[Row], cosine: bool) -> tuple[list[tuple[float, bool]], dict[str, Any]]:
    """Every result's (confidence, relevant) from the fit on the other collections, and the
    flag on searches with and without a relevant result among the k, each by its own fit."""
    pairs: list[tuple[float, bool]] = []
    flags = {"none relevant": [0, 0], "some relevant": [0, 0]}  # [flagged, searches]
    for held in sorted({r.collection for r in rows}):
        cv = choose([r for r in rows if r.collection != held], cosine)
        test = [r for r in rows if r.collection == held]
        pairs += confidences(test, cv)
        best: dict[str, float] = {}
        some: dict[str, bool] = {}
        for r, (sure, relevant) in zip(test, confidences(test, cv), strict=True):
            best[r.query] = max(best.get(r.query, 0.0), sure)
            some[r.query] = some.get(r.query, False) or relevant
        for query, top in best.items():
            cell = flags["some relevant" if some[query] else "none relevant"]
            cell[0] += top < cv.no_match_below
            cell[1] += 1
    return pairs, flags


def reliability(pairs: Sequence[tuple[float, bool]]) -> list[list[object]]:
    """Results per confidence bucket (the last is >= SURE): how many, their mean confidence,
    the share judged relevant."""
    table: list[list[object]] = []
    for low, high in itertools.pairwise(BUCKETS):
        inside = [(c, y) for c, y in pairs if low <= c < high or (high == 1.0 and c == 1.0)]
        mean = statistics.fmean(c for c, _ in inside) if inside else float("nan")
        share = sum(y for _, y in inside) / len(inside) if inside else float("nan")
        table.append([f"{low:.1f}-{high:.1f}", len(inside), mean, share])
    return table


def cpu() -> str:
    """The CPU's model name (benchmarks name their CPU class)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON last")
    parser.add_argument("--rows", type=Path, metavar="FILE",
                        help="read every result's signals from FILE when it exists, else write "
                        "them there (refit without searching again)")  # fmt: skip
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows: list[Row] = []
    if args.rows and args.rows.exists():
        saved = json.loads(args.rows.read_text(encoding="utf-8"))
        model, rows = saved["model"], [Row(**r) for r in saved["rows"]]
    else:
        with embedder() as url:
            for name, (docs, folder) in COLLECTIONS.items():
                rows += collect(name, docs, folder, url)
                with embed_client(bench_settings(docs, docs / "q", url)) as client:
                    model = client.model
        if args.rows:
            args.rows.parent.mkdir(parents=True, exist_ok=True)
            args.rows.write_text(json.dumps({"model": model, "rows": [asdict(r) for r in rows]}),
                                 encoding="utf-8")  # fmt: skip
    out: dict[str, Any] = {"model": model_name(model), "cpu": cpu(), "fits": {}}
    for label, cosine in (("with cosine", True), ("without cosine", False)):
        fitted = choose(rows, cosine)
        table = []
        for held in COLLECTIONS:
            train = [r for r in rows if r.collection != held]
            test = [r for r in rows if r.collection == held]
            cv = choose(train, cosine)
            scores = flag_scores(best_per_query(test, cv), cv.no_match_below)
            table.append([held, f"{scores['precision']:.2f}", f"{scores['recall']:.2f}",
                          f"{scores['f1']:.2f}", f"{scores['found_flagged']:.2f}",
                          f"{calibration_error(test, cv):.3f}"])  # fmt: skip
        inside = flag_scores(best_per_query(rows, fitted), fitted.no_match_below)
        table.append(["all (in-sample)", f"{inside['precision']:.2f}", f"{inside['recall']:.2f}",
                      f"{inside['f1']:.2f}", f"{inside['found_flagged']:.2f}",
                      f"{calibration_error(rows, fitted):.3f}"])  # fmt: skip
        print(f"\n{label}: {fitted}")
        print(format_table(["held out", "precision", "recall", "F1", "found flagged", "ECE"],
                           table))  # fmt: skip
        pairs, flags = held_out(rows, cosine)
        buckets = reliability(pairs)
        print(
            f"\nreliability, {label}, held out (confidence from the fit on the other "
            f"collections; k={K}):"
        )
        print(format_table(["confidence", "results", "mean confidence", "share relevant"],
                           buckets))  # fmt: skip
        for kind, (flagged, searches) in flags.items():
            print(
                f"no_good_match on searches with {kind} among the {K}: {flagged} of {searches}"
                f" ({flagged / max(searches, 1):.0%})"
            )
        out["fits"][label] = {"calibration": asdict(fitted), "table": table,
                              "reliability": buckets, "flags": flags}  # fmt: skip
    queries = len({r.query for r in rows})
    print(f"\n{len(rows)} results of {queries} queries; wall time "
          f"{time.perf_counter() - started:.0f}s")  # fmt: skip
    if args.json:
        print(json.dumps(out))
    return 0 if all(math.isfinite(v) for v in fit(rows, True)) else 1


if __name__ == "__main__":
    raise SystemExit(main())
