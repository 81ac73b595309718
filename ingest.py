"""Ingest the notes in NOTES_DIR into Qdrant, then move them to NOTES_DIR/ingested; sync every
NOTE_FOLDERS folder in place (docs/design/folders.md).

    uv run ingest.py                  # new and re-dropped notes; every folder synced
    uv run ingest.py --rebuild        # every note, ingested/ included
    (docs/design/ingest-and-storage.md)
    uv run ingest.py --youtube-only   # only the YOUTUBE_PLAYLISTS playlists (docs/guide/youtube.md)
    uv run ingest.py --allow-deletes  # confirm a folder sync that soft-deletes many notes
    uv run ingest.py --watch          # stay running: sync what changes (docs/guide/watching.md)
    uv run ingest.py --save-url URL   # a web page saved as a note in the inbox (docs/guide/web.md)
    uv run ingest.py --list-deleted   # soft-deleted notes; --delete NOTE [--hard],
                                      # --restore NOTE, --purge-deleted (docs/design/folders.md)

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

from kb.app import handoff, remember
from kb.app.backend import Backend
from kb.app.cli import fail, script, setup_logging
from kb.app.notes import open_notes
from kb.app.watch import Watcher
from kb.core.errors import IngestError
from kb.core.settings import Settings, get_settings
from kb.core.state import JOINING, State
from kb.ingest.options import IngestOptions
from kb.ingest.progress import ConsoleProgress, format_summary
from kb.sources import registry


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Ingest notes from NOTES_DIR into Qdrant.")
    parser.add_argument(
        "--rebuild",
        nargs="?",
        const=True,
        default=False,
        metavar="COLLECTION",
        help="re-index every note, ingested/ included: in place, or re-created for a new "
        "model; with a collection's name (COLLECTION or CODE_COLLECTION) that one only",
    )
    parser.add_argument(
        "--allow-deletes",
        action="store_true",
        help="let a folder sync soft-delete more than NOTE_FOLDERS_MAX_DELETE of its notes",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also list every file skipped (with the gate that skipped it) and ignored",
    )
    parser.add_argument(
        "--watch",
        action="store_true",
        help="stay running: sync NOTES_DIR and NOTE_FOLDERS as files change (Ctrl-C stops)",
    )
    parser.add_argument(
        "--youtube-only",
        action="store_true",
        help="sync only the YOUTUBE_PLAYLISTS playlists (not the inbox or NOTE_FOLDERS)",
    )
    parser.add_argument(
        "--save-url",
        metavar="URL",
        help="fetch the web page at URL and save its text as a note in the inbox, indexed",
    )
    deleted = parser.add_argument_group(
        "deleted notes (no ingest runs)"
    ).add_mutually_exclusive_group()
    deleted.add_argument("--delete", metavar="NOTE", help="hide NOTE from searches, kept")
    deleted.add_argument("--restore", metavar="NOTE", help="make a soft-deleted NOTE searchable")
    deleted.add_argument(
        "--purge-deleted",
        action="store_true",
        help="delete for good the notes soft-deleted more than PURGE_AFTER_DAYS days ago",
    )
    deleted.add_argument("--list-deleted", action="store_true", help="list soft-deleted notes")
    parser.add_argument("--hard", action="store_true", help="with --delete: delete for good")
    return parser


@script
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    maintaining = args.delete or args.restore or args.purge_deleted or args.list_deleted
    if args.hard and not args.delete:
        parser.error("--hard goes with --delete NOTE")
    if maintaining and (args.rebuild or args.allow_deletes or args.youtube_only):
        parser.error("--rebuild and --allow-deletes run an ingest; give them on their own")
    if args.watch and (maintaining or args.rebuild or args.allow_deletes or args.youtube_only):
        parser.error("--watch runs on its own")
    if args.save_url and (maintaining or args.watch or args.rebuild or args.youtube_only):
        parser.error("--save-url runs on its own")
    settings = get_settings()
    registry.check(settings)  # every kind's own settings: a wrong one is named before any work
    setup_logging(settings.LOG_LEVEL)
    if args.rebuild not in (True, False, settings.COLLECTION, settings.CODE_COLLECTION):
        parser.error(
            f"--rebuild {args.rebuild}: not a collection of this index (COLLECTION "
            f"{settings.COLLECTION} or CODE_COLLECTION {settings.CODE_COLLECTION})"
        )
    if maintaining:
        return maintain(args, settings)
    if args.watch:
        return watch(settings)
    if args.save_url:
        return save_url(settings, args)
    return ingest(args, settings)


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def ingest(args: argparse.Namespace, settings: Settings) -> int:
    """One ingest run, in this process or by the MCP server holding embedded storage
    (kb.app.notes); an ingest already running is joined first. Ctrl-C stops it after the
    current group."""
    stop = threading.Event()

    def interrupted(signum: int, frame: FrameType | None) -> None:
        # the first Ctrl-C finishes the current group (stored notes get moved); a second one
        # stops at once (KeyboardInterrupt): nothing is half-written either way
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print("stopping after the current group (Ctrl-C again to stop now)", file=sys.stderr)

    options = IngestOptions(
        rebuild=args.rebuild,
        allow_deletes=args.allow_deletes,
        youtube_only=args.youtube_only,
        stop=stop,
        progress=ConsoleProgress(sys.stderr),
    )
    previous = signal.signal(signal.SIGINT, interrupted)
    joined: list[str] = []

    def joining(line: str) -> None:
        if line.startswith(JOINING):
            joined.append(line)
        say(line)

    notes = open_notes(settings)
    try:
        summary = notes.ingest(options, joining)
    except IngestError as exc:
        if exc.summary is not None and (exc.summary.ingested or exc.summary.failed):
            print(format_summary(exc.summary, verbose=args.verbose))
        return fail(str(exc))
    finally:
        notes.close()
        signal.signal(signal.SIGINT, previous)
    if joined and not (summary.written or summary.deleted or summary.removed):
        say("the ingest it joined had done it all: nothing was left to change")
    print(format_summary(summary, verbose=args.verbose))
    return 1 if summary.failed else 0


def save_url(settings: Settings, args: argparse.Namespace) -> int:
    """Fetch a page, save it in the inbox and index it (kb.app.remember), here or by the MCP
    server holding embedded storage."""
    page = remember.fetch_page(settings, args.save_url)
    notes = open_notes(settings)
    try:
        print(notes.ingest_saved(lambda: remember.write_page(settings, page), say))
    finally:
        notes.close()
    return 0


def watch(settings: Settings) -> int:
    """Watch until Ctrl-C or SIGTERM (a service manager stopping it): both end the watch after
    the current batch; a second Ctrl-C stops at once. The MCP server holding embedded storage
    watches in its own process (MCP_WATCH, as `make local` starts it)."""
    server = handoff.running(settings) if settings.QDRANT_PATH else None
    if server is not None:
        watching = State(settings.STATE_DIR).watcher_pid() == server.pid
        if watching:
            print(f"the MCP server (pid {server.pid}) holds {settings.QDRANT_PATH} and watches "
                  "NOTES_DIR and NOTE_FOLDERS already (MCP_WATCH)")  # fmt: skip
            return 0
        return fail(
            f"the MCP server (pid {server.pid}) holds {settings.QDRANT_PATH}: a watcher runs "
            "in the process that holds it; restart the server with MCP_WATCH=true"
        )
    stop = threading.Event()

    def stopping(signum: int, frame: FrameType | None) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print("stopping after the current batch (Ctrl-C again to stop now)", file=sys.stderr)

    previous = {sig: signal.signal(sig, stopping) for sig in (signal.SIGINT, signal.SIGTERM)}
    backend = Backend(settings)
    try:
        Watcher(backend, stop=stop).run()
    finally:
        backend.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def maintain(args: argparse.Namespace, settings: Settings) -> int:
    """One kb.ingest.lifecycle operation, after any running ingest; prints what it did (paths,
    counts)."""
    notes = open_notes(settings)
    try:
        if args.delete and args.hard:
            print(f"deleted for good: {', '.join(notes.delete(args.delete, hard=True))}")
        elif args.delete:
            done = notes.delete(args.delete, hard=False)
            print(f"deleted {args.delete} (kept, hidden: --restore brings it back)" if done
                  else f"{args.delete} was already deleted")  # fmt: skip
        elif args.restore:
            restored = notes.restore(args.restore)
            print(f"restored {args.restore}" if restored else f"{args.restore} is not deleted")
        elif args.purge_deleted:
            days = settings.PURGE_AFTER_DAYS
            purged = notes.purge(days)
            for source in purged:
                print(source)
            older = f"deleted more than {days} days ago" if days else "soft-deleted"
            print(f"purged {len(purged)} notes {older}")
        else:
            deleted = notes.list_deleted()
            for note in deleted:
                print(f"{note.source}  {note.deleted_at}  {note.cause}")
            print(f"{len(deleted)} deleted notes")
    finally:
        notes.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
