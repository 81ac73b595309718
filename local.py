"""Run everything on the host, no Docker: the embedder and the MCP server with embedded storage.

    uv run local.py          # what `make local` runs; Ctrl-C stops both

Prints where each listens once it answers. Storage is QDRANT_PATH (qdrant_data/ when unset),
on Qdrant's engine in-process; the embedder loads EMBED_MODEL from a folder or the Hugging Face
cache (offline: HF_HUB_OFFLINE=1 unless set) and listens where EMBED_URL points. While it runs,
`uv run ingest.py` and `uv run query.py` go through the MCP server (kb.app.notes).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from types import FrameType

from kb.app.cli import script
from kb.app.local_stack import Stack
from kb.core.settings import get_settings


@script
def main(argv: Sequence[str] | None = None) -> int:
    stack = Stack(get_settings(), lambda line: print(line, flush=True))

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    # SIGINT too: a shell starts background jobs with SIGINT ignored, and Python keeps that.
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        stack.start()
        stack.wait()
    except KeyboardInterrupt:
        print("stopping the MCP server and the embedder", file=sys.stderr, flush=True)
        return 0
    finally:
        stack.stop()


if __name__ == "__main__":
    raise SystemExit(main())
