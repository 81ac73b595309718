"""A stored note's life after its file: soft delete, restore, delete for good, purge, list.

A soft-deleted note keeps its points (text, vectors) with `deleted_at` and `deleted_cause`
(kb.core.schema) and is hidden from every search and count. A sync soft-deletes a note whose file
left its folder ("file_deleted"); these functions do it by hand ("user"). A restore makes the
note searchable as it was, with no embedding, and records `restored_at`: the next sync leaves it
alone while its file stays away (kb.ingest.plan). Only `hard_delete` and `purge` remove points.

Callers that write (ingest.py, the MCP server) hold the ingest lock (kb.core.state) around these.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from kb.core.errors import NoteNotFound
from kb.core.schema import DELETED_AT, DELETED_CAUSE, ORIGIN, SOURCE, USER_DELETED
from kb.ingest import plan as sync
from kb.store import collection
from kb.store.points import Store
from kb.store.query import deleted_filter


@dataclass(frozen=True)
class DeletedNote:
    source: str
    origin: str | None  # "inbox" or a NOTE_FOLDERS name
    deleted_at: str  # UTC, ISO 8601
    cause: str | None  # "file_deleted" or "user"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def moment(value: str) -> datetime:
    """An ISO date or date-time, UTC when it names no zone; ValueError naming it otherwise."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO date (YYYY-MM-DD) or date-time") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _points(store: Store, sources: Iterable[str]) -> dict[str, dict[str, str]]:
    """The stored points of each of `sources`; NoteNotFound naming those it does not hold."""
    wanted = sorted(set(sources))
    collection.require(store)
    found = store.fingerprints(wanted)
    missing = [s for s in wanted if not found.get(s)]
    if missing:
        raise NoteNotFound(
            f"no note {', '.join(missing)} in collection '{store.collection}' (names are "
            "relative to the notes folder, e.g. vault/food/kimchi.md)"
        )
    return found


def soft_delete(store: Store, source: str, cause: str = USER_DELETED) -> bool:
    """Hide a note from every search, keeping its points; False when it already was."""
    if sync.deleted(_points(store, [source])[source]):
        return False
    store.soft_delete([source], cause, now_iso())
    return True


def restore(store: Store, source: str) -> bool:
    """Make a soft-deleted note searchable again as it was (nothing embedded); False when it
    was not deleted. It stays, even while its file is gone, until it is deleted again."""
    if not sync.deleted(_points(store, [source])[source]):
        return False
    store.restore([source], now_iso())
    return True


def hard_delete(store: Store, sources: Iterable[str]) -> list[str]:
    """Remove every point of these notes (live or soft-deleted) for good; the names removed.
    Nothing is removed when one of them is unknown (NoteNotFound)."""
    found = sorted(_points(store, sources))
    store.delete_sources(found)
    return found


def list_deleted(
    store: Store, cause: str | None = None, since: str | None = None
) -> list[DeletedNote]:
    """Soft-deleted notes (of one cause; deleted at or after `since`, an ISO date), by name."""
    collection.require(store)
    after = moment(since).isoformat() if since else None
    return [
        DeletedNote(
            source=str(p.get(SOURCE)),
            origin=p.get(ORIGIN),
            deleted_at=str(p.get(DELETED_AT)),
            cause=p.get(DELETED_CAUSE),
        )
        for p in store.deleted_notes(deleted_filter(cause, after))
    ]


def purge(store: Store, older_than_days: int, now: datetime | None = None) -> list[str]:
    """Delete for good the notes soft-deleted more than `older_than_days` days ago (0: every
    soft-deleted note); the names removed."""
    if older_than_days < 0:
        raise ValueError(f"older_than_days must be 0 or more, got {older_than_days}")
    cutoff = (now or datetime.now(UTC)) - timedelta(days=older_than_days)
    old = [
        n.source
        for n in list_deleted(store)
        if older_than_days == 0 or moment(n.deleted_at) < cutoff
    ]
    store.delete_sources(old)
    return old
