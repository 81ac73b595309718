"""Generated hostile input against the real embedder process (the session's MiniLM server):
schemathesis builds valid and invalid requests from the embedder's own OpenAPI schema. No
server error, no NaN or non-unit vector, every error in the one envelope. bench/fuzz.py runs the
same loop with >= 1,000 requests; this is its CI-sized run."""

from __future__ import annotations

from bench import fuzz

REQUESTS = 150  # ~20-40 s here; bench/fuzz.py sends 1,000+


def test_generated_requests_get_no_server_error_no_bad_vector_and_only_envelope_errors(
    embedder_url: str,
) -> None:
    counts = fuzz.fuzz(embedder_url, REQUESTS, start_seed=18)
    assert counts.requests >= REQUESTS
    assert counts.by_status.get(200, 0) > 0 and counts.by_status.get(422, 0) > 0  # both kinds
    assert counts.ok, fuzz.report(counts, 0)


def test_the_checks_catch_a_server_error_a_bad_vector_and_a_bare_error() -> None:
    counts = fuzz.Counts()
    fuzz.check(counts, "POST", "/v1/embeddings", 500, b'{"detail": "boom"}')
    fuzz.check(counts, "POST", "/v1/embeddings", 200, b'{"data": [{"embedding": [0.5, 0.5]}]}')
    fuzz.check(counts, "POST", "/v1/embeddings", 200, b'{"data": [{"embedding": [1.0, NaN]}]}')
    fuzz.check(counts, "GET", "/v1/models", 404, b"Not Found")
    assert (counts.server_errors, counts.bad_vectors, counts.non_envelope_errors) == (1, 2, 2)
    assert not counts.ok
