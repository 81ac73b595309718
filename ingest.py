"""Ingest the notes in NOTES_DIR into Qdrant, then move them to NOTES_DIR/ingested.

    uv run ingest.py            # new and re-dropped notes only
    uv run ingest.py --rebuild  # re-index every note, ingested/ included (see README "Rebuild")

Exit status: 0 when every note was ingested, 1 when some were not (listed with reasons) or the
run stopped (one `error:` line), 2 for bad settings.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from embed_client import EmbedClient
from kb.ingest import IngestError, ingest_lock, run
from kb.progress import ConsoleProgress, format_summary
from kb.settings import describe_invalid, get_settings
from kb.store import Store, StoreError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Ingest notes from NOTES_DIR into Qdrant.")
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="re-index every note, ingested/ included: in place, or re-created for a new model",
    )
    args = parser.parse_args(argv)
    try:
        settings = get_settings()
    except ValidationError as exc:
        print(f"error: {describe_invalid(exc)}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.LOG_LEVEL, format="%(message)s")
    if logging.getLogger().level > logging.DEBUG:
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise

    summary = None
    try:
        # the lock first: a second ingest is told "another ingest is running", not "storage busy"
        with (
            ingest_lock(settings.NOTES_DIR),
            Store.open(settings) as store,
            EmbedClient(settings=settings) as client,
        ):
            summary = run(
                settings, client, store, rebuild=args.rebuild, progress=ConsoleProgress(sys.stderr)
            )
    except IngestError as exc:
        if exc.summary.ingested or exc.summary.failed:
            print(format_summary(exc.summary))
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(format_summary(summary))
    return 1 if summary.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
