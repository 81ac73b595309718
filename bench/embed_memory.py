"""Peak memory of the real embedder process under a maximum-size request, beside the model's size.

Starts `python embedder/app.py` (the container's command) on a model folder, waits for /health,
reads the process's resident size (VmRSS) once the model is loaded, resets the kernel's
high-water mark (`/proc/PID/clear_refs` = 5), sends one request of inputs that each fill
EMBED_MAX_TOKENS (several micro-batches, and more than one wave of them), and reads the peak
(VmHWM). Linux only. Target: peak <= 1.3x the loaded size.

`--engines torch:fp32,onnx:int8,...` measures one embedder process per EMBED_BACKEND:EMBED_DTYPE
(ONNX engines from an export made first, as the image makes it), so engines compare side by side.

    uv run --group dev bench/embed_memory.py [--model DIR] [--inputs N] [--layers N]
        [--engines B:D,...] [--json]

Without --model it builds the Qwen3-Embedding-0.6B-shaped random model (bench/qwen3_shape.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import BenchError, export_apart, free_port, require_folder
from bench.qwen3_shape import QWEN3_06B, WORDS, build_apart
from kb.app.process import Child, ChildError

ROOT = Path(__file__).resolve().parent.parent


TARGET = 1.3


def exit_on_sigterm() -> None:
    """Run `finally` blocks on SIGTERM too: the embedder child and the temp model folder go."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))


def _status_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of a process, in MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def measure(model: Path, inputs: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Resident size after load and peak under one request of `inputs` maximum-length inputs."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    full_env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "EMBED_MODEL": str(model),
        "EMBED_HOST": "127.0.0.1",
        "EMBED_PORT": str(port),
        "LOG_LEVEL": "WARNING",
        **(env or {}),
    }
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, str(ROOT / "embedder" / "app.py")]
        with Child("embedder", argv, env=full_env, log=Path(tmp) / "embedder.log") as child:
            health = child.wait_ready(f"{url}/health", 600).json()
            max_tokens = health["max_input_tokens"]
            # One word = one token with the bench tokenizer: every input is truncated to the limit.
            text = " ".join(f"w{i % WORDS}" for i in range(max_tokens + 100))
            resident = _status_mb(child.pid)["VmRSS"]
            Path(f"/proc/{child.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
            started = time.perf_counter()
            response = httpx.post(
                f"{url}/v1/embeddings", json={"input": [text] * inputs}, timeout=1800
            )
            seconds = time.perf_counter() - started
            if response.status_code != 200:
                raise ChildError(f"embedder answered {response.status_code}:\n{child.log_tail()}")
            tokens = response.json()["usage"]["prompt_tokens"]
            status = _status_mb(child.pid)
    return {
        "backend": health.get("backend", "torch"),
        "dtype": health["dtype"],
        "device": health["device"],
        "inputs": inputs,
        "tokens": tokens,
        "request_s": round(seconds, 2),
        "resident_mb": round(resident),
        "peak_rss_mb": round(status["VmHWM"]),
        "peak_over_resident": round(status["VmHWM"] / resident, 3),
    }


def report(result: dict[str, Any]) -> str:
    verdict = "ok" if result["peak_over_resident"] <= TARGET else f"OVER the {TARGET}x target"
    return (
        f"memory ({result['backend']} {result['dtype']} on {result['device']}): one request of "
        f"{result['inputs']} inputs x {result['tokens'] // result['inputs']} tokens in "
        f"{result['request_s']:.1f} s; "
        f"resident after load {result['resident_mb']} MB, peak {result['peak_rss_mb']} MB = "
        f"{result['peak_over_resident']:.2f}x ({verdict})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="model folder (default: build the 0.6B shape)")
    parser.add_argument("--inputs", type=int, default=4, help="maximum-length inputs (default 4)")
    parser.add_argument(
        "--layers", type=int, default=QWEN3_06B["num_hidden_layers"], help="default 28 (0.6B)"
    )
    parser.add_argument(
        "--engines",
        type=engines,
        default=[],
        help="comma-separated EMBED_BACKEND:EMBED_DTYPE, one process each (default: the service's)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    if not Path("/proc/self/clear_refs").exists():
        print("error: embed_memory.py needs Linux (/proc/PID/clear_refs)", file=sys.stderr)
        return 2
    try:  # before the model is built or the embedder started
        if args.inputs < 1 or args.layers < 1:
            raise BenchError("--inputs and --layers must be at least 1")
        if args.model is not None:
            require_folder(args.model, "--model", "config.json")
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    exit_on_sigterm()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or build_apart(Path(tmp) / "model", args.layers)
        if not args.engines:
            result = measure(model, args.inputs)
            print(report(result))
            if args.json:
                print(json.dumps(result))
            return 0
        exports = Path(tmp) / "onnx"
        if any(backend == "onnx" for backend, _ in args.engines):
            export_apart(model, exports)
        results = []
        for backend, dtype in args.engines:
            env = {"EMBED_BACKEND": backend, "EMBED_DTYPE": dtype, "EMBED_ONNX_DIR": str(exports)}
            results.append(measure(model, args.inputs, env))
            print(report(results[-1]), flush=True)
    if args.json:
        print(json.dumps({"engines": results}))
    return 0


def engines(text: str) -> list[tuple[str, str]]:
    """`torch:fp32,onnx:int8` -> [("torch", "fp32"), ("onnx", "int8")]; argparse reports errors."""
    out = []
    for item in filter(None, text.split(",")):
        backend, _, dtype = item.partition(":")
        if backend not in {"torch", "onnx"} or dtype not in {"fp32", "bf16", "int8"}:
            raise argparse.ArgumentTypeError(
                f"{item!r}: expected torch or onnx, a colon, then fp32, bf16 or int8"
            )
        out.append((backend, dtype))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
