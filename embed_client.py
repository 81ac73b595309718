"""Embed one text with the embedder at EMBED_URL and print its size and norm.

    uv run embed_client.py "some text" [--query]

The client itself is kb.embedding.client.EmbedClient (shared by every script and the MCP server).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from kb.app.backend import embed_client
from kb.app.cli import script
from kb.core.settings import get_settings


@script
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Embed one text and print its size and norm.")
    parser.add_argument("text")
    parser.add_argument("--query", action="store_true", help="embed as a search query")
    args = parser.parse_args(argv)
    with embed_client(get_settings()) as client:
        if args.query:
            vector = client.embed_query(args.text)
        else:
            vector = client.embed_documents([args.text])[0]
        model = client.model
    norm = math.sqrt(math.fsum(x * x for x in vector))
    print(f"{model}: {len(vector)} dimensions, norm {norm:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
