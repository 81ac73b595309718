"""Ingest the notes in NOTES_DIR into Qdrant, then move them to NOTES_DIR/ingested; sync every
NOTE_FOLDERS folder in place (docs/design/folders.md).

    uv run ingest.py                  # new and re-dropped notes; every folder synced
    uv run ingest.py --rebuild        # every note, ingested/ included
    (docs/design/ingest-and-storage.md)
    uv run ingest.py --youtube-only   # only the YOUTUBE_PLAYLISTS playlists (docs/guide/youtube.md)
    uv run ingest.py --allow-deletes  # confirm a folder sync that soft-deletes many notes
    uv run ingest.py --watch          # stay running: sync what changes (docs/guide/watching.md)
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

from kb.app import handoff
from kb.app.backend import Backend, embed_client, open_store
from kb.app.cli import fail, script, setup_logging
from kb.app.ingest import run
from kb.app.watch import Watcher
from kb.core.errors import IngestError, StoreUnavailable
from kb.core.settings import Settings, get_settings
from kb.core.state import State
from kb.ingest import lifecycle
from kb.ingest.options import IngestOptions
from kb.ingest.progress import ConsoleProgress, format_summary
from kb.store import optimize


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
    settings = get_settings()
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
    return ingest(args, settings)


def ingest(args: argparse.Namespace, settings: Settings) -> int:
    """One ingest run, here or through the MCP server holding embedded storage; Ctrl-C stops it
    after the current group."""
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
    try:
        # the lock first: a second ingest is told "another ingest is running", not "storage busy"
        with (
            State(settings.STATE_DIR).lock(),
            open_store(settings) as store,
            embed_client(settings) as client,
        ):
            summary = run(settings, client, store, options)
            if not stop.is_set():  # embedded storage: its search index, off the request path
                optimize.after_ingest(
                    store,
                    [settings.COLLECTION, settings.CODE_COLLECTION],
                    written=summary.written,
                    say=lambda line: print(line, file=sys.stderr),
                )
    except IngestError as exc:
        if exc.summary is not None and (exc.summary.ingested or exc.summary.failed):
            print(format_summary(exc.summary, verbose=args.verbose))
        return fail(str(exc))
    except StoreUnavailable:
        server = handoff.running(settings) if settings.QDRANT_PATH else None
        if server is None:
            raise
        return through_server(settings, server, options)
    finally:
        signal.signal(signal.SIGINT, previous)
    print(format_summary(summary, verbose=args.verbose))
    return 1 if summary.failed else 0


def watch(settings: Settings) -> int:
    """Watch until Ctrl-C or SIGTERM (a service manager stopping it): both end the watch after
    the current batch; a second Ctrl-C stops at once."""
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


def through_server(settings: Settings, server: handoff.Announced, options: IngestOptions) -> int:
    """The MCP server holds embedded storage: it runs the ingest in its process, with every
    option of this one but `stop` and `progress` (kb.app.handoff). A stop request cannot
    reach that run: Ctrl-C here stops waiting for it, and says so."""
    print(
        f"embedded storage is held by the MCP server (pid {server.pid}): it runs this ingest",
        file=sys.stderr,
    )
    signal.signal(signal.SIGINT, signal.default_int_handler)  # not "after the current group"
    try:
        answer = handoff.ingest_via_server(settings, server, options)
    except KeyboardInterrupt:
        return fail(
            f"interrupted: the MCP server (pid {server.pid}) finishes this ingest on its own; "
            "its log says when"
        )
    if answer.summary:
        print(answer.summary)
    if answer.error is not None:
        return fail(answer.error)
    return 1 if answer.failed else 0


def maintain(args: argparse.Namespace, settings: Settings) -> int:
    """One kb.ingest.lifecycle operation, under the ingest lock; prints what it did (paths,
    counts)."""
    with State(settings.STATE_DIR).lock(), open_store(settings) as store:
        if args.delete and args.hard:
            print(f"deleted for good: {', '.join(lifecycle.hard_delete(store, [args.delete]))}")
        elif args.delete:
            done = lifecycle.soft_delete(store, args.delete)
            print(f"deleted {args.delete} (kept, hidden: --restore brings it back)" if done
                  else f"{args.delete} was already deleted")  # fmt: skip
        elif args.restore:
            done = lifecycle.restore(store, args.restore)
            print(f"restored {args.restore}" if done else f"{args.restore} is not deleted")
        elif args.purge_deleted:
            days = settings.PURGE_AFTER_DAYS
            purged = lifecycle.purge(store, days)
            for source in purged:
                print(source)
            older = f"deleted more than {days} days ago" if days else "soft-deleted"
            print(f"purged {len(purged)} notes {older}")
        else:
            notes = lifecycle.list_deleted(store)
            for note in notes:
                print(f"{note.source}  {note.deleted_at}  {note.cause}")
            print(f"{len(notes)} deleted notes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
