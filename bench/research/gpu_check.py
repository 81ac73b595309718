"""The GPU check of issue 33 ("on a GPU nothing regresses"), prepared to run in one call on a
lent GPU machine: the embedder's default on the GPU against the naive fp32 pass, side by side.

On the Qwen3-0.6B shape (random weights; bench/qwen3_shape.py), through the service's own code
on `--device` (EMBED_DEVICE; cuda by default):

- what EMBED_BACKEND=auto, EMBED_DTYPE=auto run there (bf16 where the GPU computes it, nothing
  measured: embed_server.hardware);
- chunks/s of the naive baseline (fp32, arrival order, batches of 16) and of the default through
  the service's engine, interleaved, best of `--repeats`;
- one 20-token query's p50/p95, and a search query as served (the instruction's keys and values
  reused, embed_server.prompt_cache) beside the same query with every token computed;
- the lowest cosine of the default's vectors (documents, search queries, one-word inputs) to
  torch fp32's on the CPU, and the device's peak memory.

It exits 1 where the default is slower than the baseline or a reused search query is slower than
the whole one (beyond 10 %, these machines being noisy); cosines are printed, not judged: random
weights say how far the GPU's arithmetic moves a vector, not what a search loses. `--device cpu`
runs the same steps here (the bench's smoke test does).

    python bench/research/gpu_check.py [--device cuda|cpu] [--layers 28] [--chunks 16] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.common import cpu_name
from bench.embed_engines import embed_all, engine, load, naive, query_latency, search_latency
from bench.qwen3_shape import QWEN3_06B, WORDS, build_apart, make_chunks

FP32 = ("torch", "fp32")
SLACK = 1.10  # a regression is a slowdown beyond this: noise stays under it


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--layers", type=int, default=QWEN3_06B["num_hidden_layers"])
    parser.add_argument("--chunks", type=int, default=16, help="chunks per setting")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs, best kept")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    return parser


def peak_mb(device: str) -> float | None:
    return torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None


def check(model: Path, args: argparse.Namespace) -> dict[str, Any]:
    chunks = make_chunks(args.chunks)
    exports = model / "no-export"  # the image carries no ONNX export
    default = load(
        model,
        ("auto", "auto"),
        exports,
        EMBED_DEVICE=args.device,
        EMBED_STATE_DIR=str(model / "state"),
    )
    fp32 = load(model, FP32, exports, EMBED_DEVICE=args.device)
    chosen = f"{default.backend} {default.dtype} on {default.device.type}"
    print(f"default (auto): {chosen}", flush=True)
    runs = {"baseline": lambda: naive(fp32, chunks), "default": lambda: engine(default, [chunks])}
    engine(default, [chunks[:2]])  # first touch: buffers and kernels sized on first use
    naive(fp32, chunks[:2])
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            seconds[name].append(run())
    rates = {name: len(chunks) / min(times) for name, times in seconds.items()}
    query = query_latency(default)
    search = search_latency(default)
    # vectors against torch fp32 on the CPU: documents, search queries, one-word inputs
    texts = chunks + [default.prompt("query") + f"w{i} w{i + 1}" for i in range(8)]
    texts += [f"w{i}" for i in range(0, WORDS, WORDS // 8)]
    cosines = np.sum(
        embed_all(default, texts)
        * embed_all(load(model, FP32, exports, EMBED_DEVICE="cpu"), texts),
        1,
    )
    return {
        "device": args.device,
        "default": chosen,
        "baseline_chunks_per_s": round(rates["baseline"], 3),
        "default_chunks_per_s": round(rates["default"], 3),
        "speedup": round(rates["default"] / rates["baseline"], 3),
        "query_p50_p95_s": [round(x, 4) for x in query],
        "search": search,
        "min_cosine_vs_cpu_fp32": round(float(cosines.min()), 5),
        "peak_device_mb": peak_mb(args.device),
    }


def regressions(result: dict[str, Any]) -> list[str]:
    found = []
    if result["speedup"] * SLACK < 1:
        found.append(f"the default ran {result['speedup']}x the naive fp32 pass")
    search = result["search"]
    if search and search["reused_s"][0] > search["whole_s"][0] * SLACK:
        found.append(f"a search query reusing the instruction took {search['reused_s'][0]} s")
    return found


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: torch sees no CUDA GPU (--device cpu runs the steps here)", file=sys.stderr)
        return 1
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else "none"
    print(f"CPU: {cpu_name()}; GPU: {gpu}; torch {torch.__version__}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        result = check(build_apart(Path(tmp) / "qwen3", args.layers), args)
    search = result["search"]
    p50, p95 = result["query_p50_p95_s"]
    print(
        f"baseline {result['baseline_chunks_per_s']} chunks/s, default "
        f"{result['default_chunks_per_s']} chunks/s: {result['speedup']}x; 20-token query p50 "
        f"{p50 * 1000:.1f} ms (p95 {p95 * 1000:.1f})"
    )
    if search:
        print(f"search query: reused p50 {search['reused_s'][0]} s, whole {search['whole_s'][0]} s")
    print(
        f"lowest cosine to torch fp32 on the CPU: {result['min_cosine_vs_cpu_fp32']}; "
        f"peak device memory: {result['peak_device_mb']} MB"
    )
    found = regressions(result)
    print("regression: " + "; ".join(found) if found else "no regression")
    if args.json:
        print(json.dumps(result | {"regressions": found, "gpu": gpu}))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
