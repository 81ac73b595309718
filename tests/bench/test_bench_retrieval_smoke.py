"""bench/retrieval.py: the metric convention, the queries format, and one real run on the
hand-written notes corpus (so neither the benchmark nor its corpus can rot)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT

from bench import retrieval
from bench.common import BenchError

BENCH = REPO_ROOT / "bench"

CORPUS = BENCH / "notes_corpus"
MODES = {"keyword", "semantic", "hybrid"}
METRICS = {"r@5", "r@10", "mrr@10", "ndcg@10"}


def run_bench(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / "retrieval.py"), *map(str, args)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def tree_digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_ndcg_uses_linear_gains_and_the_ideal_order_of_all_judged_grades() -> None:
    relevant = {"a.md": 3.0, "b.md": 1.0, "c.md": 2.0}
    got = retrieval.score(["x.md", "b.md", "a.md"], relevant)
    dcg = 1 / math.log2(3) + 3 / math.log2(4)
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert got["ndcg@10"] == pytest.approx(dcg / ideal)
    assert got["mrr@10"] == pytest.approx(0.5)
    assert got["r@5"] == got["r@10"] == pytest.approx(2 / 3)


def test_results_below_rank_ten_do_not_count() -> None:
    ranked = [f"{i}.md" for i in range(10)] + ["hit.md"]
    assert retrieval.score(ranked, {"hit.md": 1.0}) == {
        "r@5": 0.0,
        "r@10": 0.0,
        "mrr@10": 0.0,
        "ndcg@10": 0.0,
    }


def test_relevant_paths_resolve_against_docs_dir_or_the_queries_folder(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("alpha\n")
    (docs / "sub" / "b.md").write_text("beta\n")
    queries = tmp_path / "queries.jsonl"
    line = {"id": "q1", "query": "alpha", "kind": "exact"}
    line["relevant"] = {"a.md": 2, "docs/sub/b.md": 1}
    queries.write_text(json.dumps(line) + "\n")
    (query,) = retrieval.load_queries(queries, docs)
    assert query.relevant == {"a.md": 2.0, "sub/b.md": 1.0}
    assert query.kind == "exact"


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ('{"id": "q1", "query": "x", "relevant": {"missing.md": 1}}', "'missing.md'"),
        ('{"id": "q1", "query": "x", "relevant": {"a.md": 0}}', "positive number"),
        ('{"id": "q1", "query": " ", "relevant": {"a.md": 1}}', "'query'"),
        ('{"id": "q1", "query": "x", "relevant": {}}', "'relevant'"),
        ("not json", "not JSON"),
    ],
)
def test_bad_queries_are_refused_naming_the_line(tmp_path: Path, line: str, complaint: str) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("alpha\n")
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"id": "q0", "query": "ok", "relevant": {"a.md": 1}}\n' + line + "\n")
    with pytest.raises(BenchError, match=f"queries.jsonl:2: .*{complaint}"):
        retrieval.load_queries(queries, docs)


def test_a_bad_queries_file_stops_the_script_with_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("alpha\n")
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "query": "x", "relevant": {"nope.md": 1}}\n')
    # no embedder is needed: the queries are checked before anything starts
    env = {**os.environ, "EMBED_URL": "http://127.0.0.1:9"}
    proc = run_bench(tmp_path, queries, env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {queries}:1: ")


def test_notes_corpus_benchmark_reports_every_mode_and_kind_and_leaves_the_notes_alone(
    embedder_url: str,
) -> None:
    notes = CORPUS / "notes"
    before = tree_digest(notes)
    proc = run_bench(
        notes, CORPUS / "queries.jsonl", "--json", env={**os.environ, "EMBED_URL": embedder_url}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert tree_digest(notes) == before

    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result) == MODES
    for mode, groups in result.items():
        assert set(groups) == {"all", "exact", "paraphrase", "deep"}, mode
        for values in groups.values():
            assert set(values) == METRICS
            assert all(0.0 <= v <= 1.0 for v in values.values())
            assert values["r@5"] <= values["r@10"]
    # a working pipeline finds most hand-written answers; a broken one (wrong sources, no
    # collapsing, empty results) scores near zero
    for mode in MODES:
        assert result[mode]["all"]["ndcg@10"] > 0.6, (mode, result[mode])
    assert "nDCG@10" in proc.stdout
