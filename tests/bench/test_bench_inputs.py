"""The benchmarks run from a clone: their default data ships inside the repository, and a wrong
input stops them at once with one `error:` line naming it, before any model is built or
embedder started (not minutes into a run)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from helpers import REPO_ROOT

from bench import common

BENCH = REPO_ROOT / "bench"
CRANFIELD = common.CRANFIELD

# A wrong input must be reported well before a model could be built or an embedder answer.
FAST_S = 90


def bench_module(name: str) -> ModuleType:
    """bench/<name>.py in-process (the package bench)."""
    return importlib.import_module(f"bench.{name}")


def run_bench(script: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EMBED_URL"}  # it would start its own
    return subprocess.run(
        [sys.executable, str(BENCH / script), *map(str, args)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=FAST_S,
    )


def test_the_cranfield_collection_ships_inside_the_repository_and_its_queries_name_its_docs():
    assert CRANFIELD.is_relative_to(REPO_ROOT)
    assert len(list((CRANFIELD / "docs").glob("*.md"))) == 1400
    assert "Cranfield" in (CRANFIELD / "README.md").read_text(encoding="utf-8")
    queries = bench_module("retrieval").load_queries(
        CRANFIELD / "queries.jsonl", CRANFIELD / "docs"
    )
    assert len(queries) == 225


def test_every_benchmark_defaults_to_the_shipped_cranfield_collection() -> None:
    retrieval = bench_module("retrieval").parser().parse_args([])
    assert (retrieval.docs_dir, retrieval.queries) == (
        CRANFIELD / "docs",
        CRANFIELD / "queries.jsonl",
    )
    assert bench_module("ingest").parser().parse_args([]).docs == CRANFIELD / "docs"
    assert bench_module("embed_throughput").parser().parse_args([]).dataset == CRANFIELD


def missing_inputs(tmp: Path) -> list[tuple[str, list[str | Path], Path]]:
    """(script, arguments, the missing path the error must name)."""
    missing = tmp / "no-such-folder"
    corpus = BENCH / "notes_corpus"
    return [
        ("embed_throughput.py", ["--quick", "--chunks", "1", "--dataset", missing], missing),
        ("embed_memory.py", ["--model", missing], missing),
        ("ingest.py", ["--quick", "--docs", missing], missing),
        ("retrieval.py", [missing, corpus / "queries.jsonl"], missing),
        ("retrieval.py", [corpus / "notes", tmp / "none.jsonl"], tmp / "none.jsonl"),
    ]


@pytest.mark.parametrize("case", range(5), ids=lambda i: f"case{i}")
def test_a_missing_input_path_stops_the_benchmark_at_once_naming_it(
    tmp_path: Path, case: int
) -> None:
    script, args, missing = missing_inputs(tmp_path)[case]
    done = run_bench(script, *args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == ""  # nothing measured, not even the header line
    # one line, and no "embedder: starting MiniLM ..." before it
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and str(missing) in line, line


def test_an_empty_dataset_folder_is_refused_naming_its_docs_folder(tmp_path: Path, capsys) -> None:
    (tmp_path / "docs").mkdir()
    assert bench_module("embed_throughput").main(["--dataset", str(tmp_path)]) == 1
    line = capsys.readouterr().err.strip()
    assert line == f"error: --dataset {tmp_path / 'docs'}: no *.md files in it"


@pytest.mark.parametrize(
    ("script", "args", "named"),
    [
        ("embed_throughput", ["--chunks", "0"], "--chunks 0"),
        ("embed_throughput", ["--repeats", "0"], "--repeats 0"),
        ("embed_throughput", ["--memory-inputs", "-1"], "--memory-inputs -1"),
        ("embed_throughput", ["--vocab", "100"], "--vocab 100: from 2002 to 151669"),
        ("embed_memory", ["--inputs", "0"], "--inputs"),
        ("ingest", ["--limit", "0"], "--limit"),
        ("ingest", ["--emulate", "avx2"], "--emulate needs --qwen3-shape"),
    ],
)
def test_a_count_out_of_range_or_a_lone_option_stops_the_benchmark_at_once_naming_it(
    script: str, args: list[str], named: str, capsys
) -> None:
    try:
        code = bench_module(script).main(args)
    except SystemExit as exc:  # argparse's own usage error
        code = exc.code
    assert code in (1, 2)
    captured = capsys.readouterr()
    assert captured.out == "" and named in captured.err.strip().splitlines()[-1]
