"""Run everything on the host, no Docker: the embedder and the MCP server with embedded storage.

    uv run local.py          # what `make local` runs, after installing the embedder's stack

Prints where each listens once it answers. Storage is QDRANT_PATH (qdrant_data/ when unset),
on Qdrant's engine in-process; the embedder loads EMBED_MODEL from a folder or the Hugging Face
cache (offline: HF_HUB_OFFLINE=1 unless set) and listens where EMBED_URL points. While it runs,
`uv run ingest.py` and `uv run query.py` go through the MCP server (kb.app.notes).
Ctrl-C or SIGTERM stops both: one line each, exit status 0.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from types import FrameType

from kb.app.cli import script
from kb.app.local_stack import Stack
from kb.app.process import terminal_foreground
from kb.core.settings import get_settings


@script
def main(argv: Sequence[str] | None = None) -> int:
    stack = Stack(get_settings(), lambda line: print(line, flush=True))

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    # SIGINT too: a shell starts background jobs with SIGINT ignored, and Python keeps that.
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    with terminal_foreground():
        try:
            stack.start()
            stack.wait()
        except KeyboardInterrupt:
            return 0  # a stop the user asked for
        finally:
            stack.stop()


if __name__ == "__main__":
    raise SystemExit(main())
