"""Property-based fuzzing of the embedder's OpenAPI schema with schemathesis: generated valid and
invalid requests to every operation, sent to a real embedder process over HTTP.

    uv run --group dev bench/fuzz.py [--requests 1000] [--seed 0] [--quick]

Without EMBED_URL in the environment it starts a MiniLM embedder on loopback (bench/common.py).
Prints the counts and, last, one JSON line. Targets: 0 server errors (5xx), 0 NaN or non-unit
vectors, 0 errors outside the one envelope `{"error": {"message", "type", "param", "code"}}`.
Exits 1 when a target is missed. tests/test_fuzz.py runs the same loop with fewer requests.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

ENVELOPE_KEYS = {"message", "type", "param", "code"}
UNIT_TOLERANCE = 1e-3  # float32 vectors, normalised in the embedder


@dataclass
class Counts:
    requests: int = 0
    by_status: dict[int, int] = field(default_factory=dict)
    server_errors: int = 0  # 5xx
    bad_vectors: int = 0  # a NaN/inf component or a norm away from 1
    non_envelope_errors: int = 0  # a 4xx/5xx body that is not the error envelope
    examples: list[str] = field(default_factory=list)  # first few problems, for the report

    @property
    def ok(self) -> bool:
        return self.server_errors == self.bad_vectors == self.non_envelope_errors == 0

    def problem(self, what: str) -> None:
        if len(self.examples) < 5:
            self.examples.append(what)


def _vectors(body: dict) -> list[np.ndarray]:
    out = []
    for item in body["data"]:
        value = item["embedding"]
        if isinstance(value, str):  # encoding_format=base64: little-endian float32
            out.append(np.frombuffer(base64.b64decode(value), dtype="<f4"))
        else:
            out.append(np.asarray(value, dtype=np.float64))
    return out


def check(counts: Counts, method: str, path: str, status: int, content: bytes) -> None:
    """Count one response against the targets."""
    counts.requests += 1
    counts.by_status[status] = counts.by_status.get(status, 0) + 1
    if status >= 500:
        counts.server_errors += 1
        counts.problem(f"{method} {path} -> {status}: {content[:200]!r}")
    if status >= 400:
        try:
            error = json.loads(content)["error"]
            if not (isinstance(error, dict) and error.keys() >= ENVELOPE_KEYS):
                raise TypeError(error)
        except (ValueError, KeyError, TypeError):
            counts.non_envelope_errors += 1
            counts.problem(f"{method} {path} -> {status} not an envelope: {content[:200]!r}")
    elif status == 200 and path == "/v1/embeddings":
        for v in _vectors(json.loads(content)):
            norm = float(np.linalg.norm(v))
            if not (np.isfinite(v).all() and math.isclose(norm, 1.0, abs_tol=UNIT_TOLERANCE)):
                counts.bad_vectors += 1
                counts.problem(f"{method} {path} -> vector of norm {norm}")


def fuzz(url: str, requests: int, start_seed: int = 0, api_key: str = "") -> Counts:
    """Send at least `requests` generated requests (positive and negative) to the embedder."""
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    cases = st.one_of(
        schema.as_strategy(GenerationMode.POSITIVE), schema.as_strategy(GenerationMode.NEGATIVE)
    )
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    counts = Counts()
    run = start_seed
    while counts.requests < requests:

        @seed(run)
        @settings(
            max_examples=requests - counts.requests,
            database=None,  # no .hypothesis folder; the seed makes runs repeatable
            deadline=None,
            phases=[Phase.generate],  # count every request; no shrinking of a failure
            suppress_health_check=list(HealthCheck),
        )
        @given(case=cases)
        def one(case: schemathesis.Case) -> None:
            response = case.call(base_url=url, headers=headers, timeout=120)
            check(counts, case.method, case.path, response.status_code, response.content)

        before = counts.requests
        one()
        if counts.requests == before:
            break  # hypothesis found nothing new to send
        run += 1
    return counts


def cpu_class() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def report(counts: Counts, seconds: float) -> str:
    statuses = ", ".join(f"{s}: {n}" for s, n in sorted(counts.by_status.items()))
    lines = [
        f"requests {counts.requests} in {seconds:.0f}s ({statuses})",
        f"server errors (5xx) {counts.server_errors}; NaN or non-unit vectors "
        f"{counts.bad_vectors}; errors outside the envelope {counts.non_envelope_errors}",
        *(f"  {e}" for e in counts.examples),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from bench.common import embedder

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="at least this many requests")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="100 requests (a smoke run)")
    args = parser.parse_args(argv)
    total = 100 if args.quick else args.requests
    print(f"cpu: {cpu_class()}", file=sys.stderr)
    with embedder() as url:
        started = time.perf_counter()
        counts = fuzz(url, total, args.seed, os.environ.get("EMBED_API_KEY", ""))
        seconds = time.perf_counter() - started
    print(report(counts, seconds))
    result = {k: v for k, v in asdict(counts).items() if k != "examples"}
    print(json.dumps({**result, "seconds": round(seconds, 1), "cpu": cpu_class()}))
    return 0 if counts.ok else 1


if __name__ == "__main__":
    sys.exit(main())
