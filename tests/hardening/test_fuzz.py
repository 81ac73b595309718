"""Generated hostile input against the real embedder process (the session's MiniLM server):
schemathesis builds valid and invalid requests (positive and negative modes) from the embedder's
own OpenAPI schema and sends them over HTTP. Counted: 5xx answers, NaN/inf components or norms
away from 1 (float and base64 vectors), error bodies outside the one envelope
`{"error": {"message", "type", "param", "code"}}`. Targets: 0 of each.

CI sends 150 requests; `--fuzz-requests 1000` (and `-s` for the counts) is the published run:
    .venv/bin/python -m pytest tests/hardening/test_fuzz.py --fuzz-requests 1000 -s
"""

from __future__ import annotations

import base64
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from bench.common import cpu_name

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


def _vectors(body: dict[str, Any]) -> list[np.ndarray]:
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


def fuzz(url: str, requests: int, start_seed: int = 0) -> Counts:
    """Send at least `requests` generated requests (positive and negative) to the embedder."""
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    cases = st.one_of(
        schema.as_strategy(GenerationMode.POSITIVE), schema.as_strategy(GenerationMode.NEGATIVE)
    )
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
            response = case.call(base_url=url, timeout=120)
            check(counts, case.method, case.path, response.status_code, response.content)

        before = counts.requests
        one()
        if counts.requests == before:
            break  # hypothesis found nothing new to send
        run += 1
    return counts


def report(counts: Counts, seconds: float) -> str:
    statuses = ", ".join(f"{s}: {n}" for s, n in sorted(counts.by_status.items()))
    lines = [
        f"cpu: {cpu_name()}",
        f"requests {counts.requests} in {seconds:.0f}s ({statuses})",
        f"server errors (5xx) {counts.server_errors}; NaN or non-unit vectors "
        f"{counts.bad_vectors}; errors outside the envelope {counts.non_envelope_errors}",
        *(f"  {e}" for e in counts.examples),
    ]
    return "\n".join(lines)


@pytest.mark.slow
def test_generated_requests_get_no_server_error_no_bad_vector_and_only_envelope_errors(
    embedder_url: str, pytestconfig: pytest.Config
) -> None:
    requests: int = pytestconfig.getoption("fuzz_requests")
    started = time.perf_counter()
    counts = fuzz(embedder_url, requests, start_seed=18)
    print(report(counts, time.perf_counter() - started))
    assert counts.requests >= requests
    assert counts.by_status.get(200, 0) > 0 and counts.by_status.get(422, 0) > 0  # both kinds
    assert counts.ok, report(counts, 0)


def test_the_checks_catch_a_server_error_a_bad_vector_and_a_bare_error() -> None:
    counts = Counts()
    check(counts, "POST", "/v1/embeddings", 500, b'{"detail": "boom"}')
    check(counts, "POST", "/v1/embeddings", 200, b'{"data": [{"embedding": [0.5, 0.5]}]}')
    check(counts, "POST", "/v1/embeddings", 200, b'{"data": [{"embedding": [1.0, NaN]}]}')
    check(counts, "GET", "/v1/models", 404, b"Not Found")
    assert (counts.server_errors, counts.bad_vectors, counts.non_envelope_errors) == (1, 2, 2)
    assert not counts.ok
