"""A note's path or a folder as the user writes it -> as the index names it.

The notes of a NOTE_FOLDERS folder are named `<its name>/...` (vault/projects/kimchi.md), which
a user who knows the folder from the inside does not write (projects/kimchi.md). Every
interface that takes a note path resolves it here: the search filter `path` (kb.search.entry),
read_note and query.py --show (kb.search.read), related_notes (kb.search.related) and
why_not_found (kb.app.why). A path the index holds stays as written; else the one stored
folder that holds `<name>/<path>` gives it its name; else nothing is found, and `problem` says
how the folders' notes are named (or which folders hold the path, when several do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kb.core.schema import INBOX, ORIGIN
from kb.search.filters import Filters
from kb.store import collection
from kb.store.points import Store


@dataclass(frozen=True)
class Resolved:
    path: str  # as the index names it (as written when nothing holds it)
    problem: str | None = None  # why nothing is found under it, when so


def resolve(stores: Sequence[Store], path: str) -> Resolved:
    """`path` (a note or a folder, normalised as the `path` filter does) in the index of
    `stores`: see the module docstring."""
    written, path = path, Filters(path=path).path or ""
    live = [s for s in stores if collection.info(s) is not None]
    if not path or not live or _held(live, path):  # nothing ingested: the caller says so
        return Resolved(path or written)
    names = _folders(live)
    found = [f"{name}/{path}" for name in names if _held(live, f"{name}/{path}")]
    if len(found) == 1:
        return Resolved(found[0])
    if found:
        return Resolved(written, f"{path!r} is in several folders: write {' or '.join(found)}")
    named = ", ".join(f"folder {name!r} are named '{name}/...'" for name in names)
    return Resolved(written, f"nothing is under or named {path!r}" + (
        f"; notes of {named}" if names else ""))  # fmt: skip


def _held(stores: Sequence[Store], path: str) -> bool:
    """A live note is named `path` or lies under it."""
    where = Filters(path=path).where()
    return any(store.count(where) for store in stores)


def _folders(stores: Sequence[Store]) -> list[str]:
    """The names that start stored notes' paths: the NOTE_FOLDERS folders' (and `web`), not a
    playlist's (its videos are named youtube/<id>/...)."""
    origins = {name for store in stores for name, _ in store.note_counts(ORIGIN)[1]}
    return sorted(name for name in origins - {INBOX} if _held(stores, name))
