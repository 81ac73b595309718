"""Ingest the notes in NOTES_DIR into Qdrant, then move them to NOTES_DIR/ingested; sync every
NOTE_FOLDERS folder in place (docs/folders.md).

    uv run ingest.py                  # new and re-dropped notes; every folder synced
    uv run ingest.py --rebuild        # every note, ingested/ included (docs/ingest-and-storage.md)
    uv run ingest.py --allow-deletes  # confirm a folder sync that soft-deletes many notes

Exit status: 0 when every note was ingested, 1 when some were not (listed with reasons) or the
run stopped (one `error:` line), 2 for bad settings.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from kb.backend import embed_client, open_store
from kb.cli import fail, script, setup_logging
from kb.errors import IngestError
from kb.ingest import run
from kb.progress import ConsoleProgress, format_summary
from kb.settings import get_settings
from kb.state import State


@script
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Ingest notes from NOTES_DIR into Qdrant.")
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="re-index every note, ingested/ included: in place, or re-created for a new model",
    )
    parser.add_argument(
        "--allow-deletes",
        action="store_true",
        help="let a folder sync soft-delete more than NOTE_FOLDERS_MAX_DELETE of its notes",
    )
    args = parser.parse_args(argv)
    settings = get_settings()
    setup_logging(settings.LOG_LEVEL)
    stop = threading.Event()

    def interrupted(signum: int, frame: FrameType | None) -> None:
        # the first Ctrl-C finishes the current group (stored notes get moved); a second one
        # stops at once (KeyboardInterrupt): nothing is half-written either way
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print("stopping after the current group (Ctrl-C again to stop now)", file=sys.stderr)

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        # the lock first: a second ingest is told "another ingest is running", not "storage busy"
        with (
            State(settings.STATE_DIR).lock(),
            open_store(settings) as store,
            embed_client(settings) as client,
        ):
            summary = run(
                settings,
                client,
                store,
                rebuild=args.rebuild,
                progress=ConsoleProgress(sys.stderr),
                stop=stop,
                allow_deletes=args.allow_deletes,
            )
    except IngestError as exc:
        if exc.summary is not None and (exc.summary.ingested or exc.summary.failed):
            print(format_summary(exc.summary))
        return fail(str(exc))
    finally:
        signal.signal(signal.SIGINT, previous)
    print(format_summary(summary))
    return 1 if summary.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
