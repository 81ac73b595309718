"""Check a running embedder: its HTTP API (prints `smoke ok`), then embed_client (`client ok`).

Both checks: /health, a document and a query embedded, dimensions and unit norms, and a related
pair scoring above an unrelated one. Reads EMBED_URL (and EMBED_API_KEY); exits non-zero with one
`error:` line.
An embedder that is down or still loading is waited for (`--wait`, 60 s), saying so on stderr.
"""

from __future__ import annotations

import argparse
import base64
import math
import struct
import sys
from collections.abc import Sequence
from typing import Any

import httpx

from kb.app.cli import fail, script
from kb.core.errors import EmbedError, KbError
from kb.core.settings import get_settings
from kb.embedding.client import RETRY_STATUSES, EmbedClient, auth_headers, http_error

QUERY = "How do I bake bread at home?"
RELATED = "Knead the dough, let it rise for an hour, then bake the loaf in a hot oven."
UNRELATED = "The quarterly tax return must be filed with the revenue office by April."


class SmokeError(KbError):
    pass


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


def check_vectors(query: list[float], docs: list[list[float]], dims: int, via: str) -> None:
    for name, vector in (("query", query), ("related", docs[0]), ("unrelated", docs[1])):
        if len(vector) != dims:
            raise SmokeError(
                f"{via}: {name} vector has {len(vector)} dimensions, /health says {dims}"
            )
        norm = math.sqrt(math.fsum(x * x for x in vector))
        if not math.isfinite(norm) or abs(norm - 1.0) > 1e-3:
            raise SmokeError(f"{via}: {name} vector norm is {norm:.4f}, expected 1")
    related, unrelated = _cosine(query, docs[0]), _cosine(query, docs[1])
    if related <= unrelated:
        raise SmokeError(
            f"{via}: related pair scores {related:.3f}, not above the unrelated {unrelated:.3f}"
        )


def wait_healthy(url: str, wait_s: float, api_key: str = "") -> dict[str, Any]:
    """/health once the model is ready, saying once on stderr what it waits for (a silent
    minute looks like a hang)."""
    with EmbedClient(url, api_key=api_key, retries=0) as client:
        try:
            return client.health()
        except EmbedError as exc:
            if wait_s > 0 and (exc.status is None or exc.status in RETRY_STATUSES):
                print(
                    f"waiting for the embedder at {url} (up to {wait_s:g}s)...",
                    file=sys.stderr,
                    flush=True,
                )
            return client.wait_ready(wait_s)


def check_http(url: str, wait_s: float, api_key: str = "") -> None:
    health = wait_healthy(url, wait_s, api_key)
    with httpx.Client(base_url=url, timeout=60.0, headers=auth_headers(api_key)) as http:
        docs = http.post(
            "/v1/embeddings", json={"input": [RELATED, UNRELATED], "encoding_format": "float"}
        )
        query = http.post(
            "/v1/embeddings",
            json={"input": QUERY, "input_type": "query", "encoding_format": "base64"},
        )
    for response in (docs, query):
        if response.status_code == 401:
            raise http_error(url, response, api_key)
        if response.status_code != 200:
            raise SmokeError(
                f"POST /v1/embeddings answered {response.status_code}: {response.text[:200]}"
            )
    doc_body, query_body = docs.json(), query.json()
    if doc_body.get("object") != "list" or [d["index"] for d in doc_body["data"]] != [0, 1]:
        raise SmokeError("POST /v1/embeddings: response is not an OpenAI embeddings list")
    raw = base64.b64decode(query_body["data"][0]["embedding"])
    query_vector = list(struct.unpack(f"<{len(raw) // 4}f", raw))
    doc_vectors = [d["embedding"] for d in doc_body["data"]]
    check_vectors(query_vector, doc_vectors, int(health["dimensions"]), "HTTP API")


def check_client(url: str, api_key: str = "") -> None:
    with EmbedClient(url, api_key=api_key) as client:
        docs = client.embed_documents([RELATED, UNRELATED])
        query = client.embed_query(QUERY)
        check_vectors(query, docs, client.dimensions, "embed_client")


@script
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--wait", type=float, default=60.0, help="seconds to wait for /health (default 60)"
    )
    args = parser.parse_args(argv)
    settings = get_settings()
    url = settings.EMBED_URL
    try:
        check_http(url, args.wait, settings.EMBED_API_KEY)
        print("smoke ok")
        check_client(url, settings.EMBED_API_KEY)
        print("client ok")
    except KbError as exc:
        return fail(f"{exc} (URL from EMBED_URL)")
    except httpx.HTTPError as exc:
        return fail(f"embedder at {url} failed: {exc} (URL from EMBED_URL)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
