"""The code query set (bench/datasets/code) names real files of its frozen copy of kb/ and line
ranges inside them; that copy ships packed, unpacked for the run; the retrieval bench reads
documents of every kind."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from helpers import REPO_ROOT

from bench import corpora, retrieval
from bench.common import BenchError, documents

BENCH = REPO_ROOT / "bench"

QUERIES = BENCH / "datasets" / "code" / "queries.jsonl"
ARCHIVE = BENCH / "datasets" / "code" / "kb.tar.gz"  # frozen: the gate's collection must not move


def test_the_code_query_set_has_twenty_questions_each_judged_by_a_file_and_lines():
    code = documents(ARCHIVE, "code")
    queries = retrieval.load_queries(QUERIES, code)
    assert len(queries) >= 20
    for line in QUERIES.read_text().splitlines():
        entry = json.loads(line)
        path, _, span = entry["lines"].partition(":")
        assert list(entry["relevant"]) == [path]
        first, last = map(int, span.split("-"))
        length = len((code / path).read_text().splitlines())
        assert 1 <= first <= last <= length, entry["id"]


def test_the_frozen_copy_is_unpacked_outside_the_checkout_once_per_run():
    (code,) = [c for c in corpora.COLLECTIONS if c.name == "code"]
    folder = code.docs
    assert folder == code.docs  # unpacked once, not per use
    assert not folder.is_relative_to(REPO_ROOT)
    assert len(list(folder.rglob("*.py"))) == 61


def test_an_archive_without_its_named_folder_is_refused_with_its_path(tmp_path: Path):
    with tarfile.open(tmp_path / "notes.tar.gz", "w:gz") as archive:
        archive.add(ARCHIVE, arcname="other/kb.tar.gz")
    with pytest.raises(BenchError, match=r"DOCS_DIR .*notes\.tar\.gz: no folder notes/ in it"):
        documents(tmp_path / "notes.tar.gz", "DOCS_DIR")


def test_documents_of_every_indexed_kind_can_be_judged(tmp_path: Path):
    for name in ("a.pdf", "b.csv", "c.ipynb", "d.go"):
        (tmp_path / name).write_text("x")
    queries = tmp_path / "q.jsonl"
    relevant = {"a.pdf": 1, "b.csv": 1, "c.ipynb": 1, "d.go": 1}
    queries.write_text(json.dumps({"id": "q", "query": "x", "relevant": relevant}) + "\n")
    (query,) = retrieval.load_queries(queries, tmp_path)
    assert set(query.relevant) == set(relevant)


def test_the_retrieval_bench_scores_an_hnsw_and_an_int8_index_on_the_engine(
    tmp_path: Path, embedder_url: str
):
    """--index: the engine's HNSW index (int8: with scalar quantization) built after ingest, as
    ingest.py builds it; each distinct note is found first by its own words either way."""
    topics = ["shock waves on a swept wing", "heat transfer in a boundary layer", "rye bread"]
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, topic in enumerate(topics):
        (docs / f"{i}.md").write_text(f"# Note {i}\n\n{topic}, described at length.\n")
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "query": t, "relevant": {f"{i}.md": 1}}) + "\n"
            for i, t in enumerate(topics)
        )
    )
    loaded = retrieval.load_queries(queries, docs)
    for index in ("hnsw", "int8"):
        result = retrieval.evaluate(docs, loaded, embedder_url, index=index)
        assert (result.notes, result.counts["all"]) == (3, 3), index
        assert result.metrics["semantic"]["all"]["mrr@10"] == 1.0, index
