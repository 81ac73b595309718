"""The embedder benchmarks still run end to end and print their JSON (tiny sizes: a smoke test,
not a measurement; the numbers are never asserted beyond being sane)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT

BENCH = REPO_ROOT / "bench"


def run_bench(*args: str) -> tuple[str, dict]:
    proc = subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    return proc.stdout, json.loads(lines[-1])


def tiny_dataset(folder: Path) -> Path:
    """Cranfield's layout: docs/<id>.md and queries.jsonl with graded relevant docs."""
    topics = ["shock waves on a swept wing", "heat transfer in a boundary layer", "bread flour"]
    (folder / "docs").mkdir(parents=True)
    for i in range(12):
        topic = topics[i % len(topics)]
        (folder / "docs" / f"{i + 1}.md").write_text(f"# Note {i + 1}\n\n{topic}, part {i}.\n")
    queries = [
        {"id": f"q{j}", "query": topic, "relevant": {f"docs/{j + 1}.md": 2}}
        for j, topic in enumerate(topics)
    ]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    return folder


@pytest.mark.slow  # builds the Qwen3 shape, two ONNX exports and every engine: minutes
def test_throughput_bench_prints_ratios_accuracy_and_memory_as_json(tmp_path: Path) -> None:
    out, result = run_bench(
        str(BENCH / "embed_throughput.py"),
        "--quick",
        "--layers=1",
        "--vocab=2002",  # the ids the chunks use: the 151,669-row table was most of the time
        "--chunks=3",
        "--memory-inputs=2",
        f"--dataset={tiny_dataset(tmp_path / 'data')}",
        "--json",
    )
    required = {
        "baseline_chunks_per_s",
        "default_chunks_per_s",
        "speedup",
        "min_cosine_vs_fp32",
        "cpu_class",
    }
    assert required <= set(result)
    assert result["baseline_chunks_per_s"] > 0 and result["default_chunks_per_s"] > 0
    assert result["speedup"] > 0
    assert 0.99 <= result["min_cosine_vs_fp32"] <= 1.0 + 1e-6
    engines = {
        "torch fp32",
        "torch bf16",
        "torch int8",
        "onnx fp32",
        "onnx int8",
        "torch int8-per-tensor",  # what EMBED_DTYPE=int8 ran before issue 33, kept to compare
    }
    assert set(result["accuracy"]) == engines  # every candidate, ONNX Runtime's included
    assert set(result["engines_chunks_per_s"]) == set(result["query_latency_s"]) == engines
    for latency in result["query_latency_s"].values():
        assert 0 < latency["p50"] <= latency["p95"]
    # a search query reuses the instruction on every torch engine, timed beside every token
    assert set(result["search_latency_s"]) == engines - {"onnx fp32", "onnx int8"}
    for search in result["search_latency_s"].values():
        assert search["tokens"] > search["instruction_tokens_reused"] > 0
        assert 0 < search["reused_s"][0] <= search["reused_s"][1]
        assert 0 < search["whole_s"][0] <= search["whole_s"][1]
    # the default is what auto measured and chose, within the bound, and says so
    assert result["auto"]["documents"] == f"{result['default_backend']} {result['default_dtype']}"
    assert result["query_p50_ms"] > 0
    assert min(result["min_cosine_vs_fp32"], result["min_cosine_short_vs_fp32"]) >= 0.99
    for name in {"torch fp32", "onnx fp32"}:  # the fp32 engines
        assert result["accuracy"][name]["min_cosine"] >= 0.99, name
    assert result["accuracy"]["torch fp32"]["queries"] == 3
    assert f"CPU class: {result['cpu_class']}" in out
    memory = result["memory"]
    assert memory["peak_rss_mb"] >= memory["resident_mb"] > 0
    assert memory["tokens"] == 2 * 2048  # each input filled EMBED_MAX_TOKENS
    assert (result["layers"], result["vocab"]) == (1, 2002)
    assert "baseline: fp32, arrival order, batches of 16" in out


def test_memory_bench_measures_a_real_embedder_process(tiny_qwen3_path: Path) -> None:
    _, result = run_bench(
        str(BENCH / "embed_memory.py"), f"--model={tiny_qwen3_path}", "--inputs=3", "--json"
    )
    assert result["inputs"] == 3
    assert result["tokens"] == 3 * 512  # the tiny model's own limit caps EMBED_MAX_TOKENS
    assert result["peak_rss_mb"] >= result["resident_mb"] > 0
    assert result["peak_over_resident"] >= 1.0


def test_memory_bench_measures_one_process_per_engine_side_by_side(tiny_qwen3_path: Path) -> None:
    _, result = run_bench(
        str(BENCH / "embed_memory.py"),
        f"--model={tiny_qwen3_path}",
        "--inputs=1",
        "--engines=torch:fp32,onnx:int8",
        "--json",
    )
    engines = [(r["backend"], r["dtype"]) for r in result["engines"]]
    assert engines == [("torch", "fp32"), ("onnx", "int8")]  # as asked, each in its own process
    for one in result["engines"]:
        assert one["peak_rss_mb"] >= one["resident_mb"] > 0


def test_memory_bench_refuses_an_unknown_engine_naming_it() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "embed_memory.py"), "--engines=torch:fp16"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "'torch:fp16': expected torch or onnx" in proc.stderr
