"""Why a note is not found: the MCP tool `why_not_found` and `query.py --why NOTE [QUERY]`.

For one name it tells the whole story, read-only: indexed (chunks, when; stale when its file
changed since), soft-deleted (cause, when), waiting in the inbox, failed (the last sync's reason,
or the reason reading it gives now), skipped by a gate (the gate: hidden, editor file, not
tracked by git, secret, a kind not indexed, a link; kb.sources.files, the gates ingest runs),
private, or never seen (no such file in NOTES_DIR, its ingested/ or a NOTE_FOLDERS folder). With
a query it says where the note ranks among notes in each mode, which chunk is its best passage,
and which of the search's filters, or its per_note, left it out.

Nothing of the note's text is returned or logged: names, counts, lines and reasons only.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from kb.app.backend import roots
from kb.app.status import last_runs
from kb.content.chunking import chunk_note
from kb.content.notes import NoteError, normalise_tags, read_note
from kb.core.errors import EmbedError, StoreError
from kb.core.schema import DELETED_AT, DELETED_CAUSE, INBOX, FileStat
from kb.core.settings import Settings
from kb.ingest.prepare import is_private
from kb.search import Searcher, fresh, paths
from kb.search import query as kb_query
from kb.search.filters import FILTERS, Filters
from kb.sources import registry
from kb.sources.files import GONE, INGESTED, git_files, listed_now
from kb.sources.folder import folders as configured
from kb.store import collection

State = Literal[
    "indexed", "stale", "deleted", "waiting", "failed", "skipped", "private", "never_seen"
]
MODES: tuple[kb_query.Mode, ...] = ("hybrid", "semantic", "keyword")


@dataclass(frozen=True)
class ModeRank:
    mode: str
    rank: int | None  # among notes (one passage each); None: not in the best MAX_K
    score: float | None
    best_chunk: int | None  # the note's best passage in this mode
    line_start: int | None = None
    line_end: int | None = None


@dataclass
class Why:
    source: str
    state: State
    story: list[str] = field(default_factory=list)  # what happened, one sentence each
    collection: str | None = None
    chunks: int = 0
    indexed_at: str | None = None
    deleted_at: str | None = None
    deleted_cause: str | None = None
    stale: bool | None = None
    gate: str | None = None  # the gate that skipped its file
    failure: str | None = None
    ranks: list[ModeRank] = field(default_factory=list)
    cut_by: list[str] = field(default_factory=list)  # filters (and per_note) that left it out


def _name(source: str) -> str:
    name = source.strip().replace("\\", "/").removeprefix("./")
    return name.removeprefix(f"{INGESTED}/")


def why_not_found(
    settings: Settings,
    searcher: Searcher,
    source: str,
    query: str | None = None,
    filters: Filters | None = None,
    per_note: int | None = 1,
) -> Why:
    """The story of `source` (see the module docstring). ValueError for a name that is no
    note's path (absolute, `..`)."""
    name = _name(source)
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or ".." in parts:
        raise ValueError(f"source {source!r} is not a note's path (relative, no '..')")
    filters = filters or Filters()
    # a folder's note named without the folder's name (kb.search.paths)
    found = paths.resolve([store for store, _ in searcher.collections().values()], name)
    name = found.path
    why = Why(name, "never_seen")
    stored = _stored(searcher, name)
    file, shown, gate = _file(settings, name)
    if stored is not None:
        _indexed(why, stored, searcher, settings)
    elif gate is not None and gate != GONE:
        why.state, why.gate = "skipped", gate
        why.story.append(f"never indexed: ingest skips {shown}: {gate}")
    elif file is not None:
        _unindexed(why, settings, file, shown)
    elif (said := registry.unseen(name)) is not None:
        why.story.append(said)
    else:
        why.story.append(
            f"never seen: no file {name} in NOTES_DIR ({settings.NOTES_DIR}), its {INGESTED}/ "
            "or a NOTE_FOLDERS folder; names are relative to those (search results name notes "
            "so)" + (f"; {found.problem}" if found.problem else "")
        )
    if why.state in ("indexed", "stale") and query:
        _ranked(why, searcher, query, filters, per_note)
    return why


def _stored(searcher: Searcher, name: str) -> tuple[str, list[dict[str, Any]]] | None:
    """(collection, payloads) of the note in the first collection holding it."""
    for store, _ in searcher.collections().values():
        try:
            if collection.info(store) is None:
                continue
            payloads = [p for _, p in store.payloads(name)]
        except StoreError:
            continue
        if payloads:
            return store.collection, payloads
    return None


def _file(settings: Settings, name: str) -> tuple[Path | None, str, str | None]:
    """(the note's file, how to name it, the gate that skips it or None) as ingest would list
    it: a NOTE_FOLDERS folder's, else the inbox's (waiting first, then ingested/)."""
    first, _, rel = name.partition("/")
    folders = {f.name: f for f in configured(settings)} if settings.NOTE_FOLDERS else {}
    if first in folders and rel:
        folder = folders[first]
        tracked = git_files(folder.root, rel) if folder.git else None
        gate = listed_now(folder.root, rel, folder.root, tracked=tracked,
                          suffixes=folder.suffixes)  # fmt: skip
        path = folder.root / rel
        return (path if os.path.lexists(path) else None), f"{first}/{rel}", gate
    suffixes = settings.index_extensions
    inbox, done = settings.NOTES_DIR, settings.NOTES_DIR / INGESTED
    for top, shown in ((inbox, name), (done, f"{INGESTED}/{name}")):
        if os.path.lexists(top / name):
            return top / name, shown, listed_now(top, name, inbox, suffixes=suffixes)
    return None, name, GONE


def _indexed(
    why: Why, stored: tuple[str, list[dict[str, Any]]], searcher: Searcher, settings: Settings
) -> None:
    name, payloads = stored
    first = min(payloads, key=lambda p: int(p.get("chunk_index") or 0))
    why.collection, why.chunks = name, len(payloads)
    why.indexed_at = first.get("date_ingested")
    if first.get(DELETED_AT):
        why.state = "deleted"
        why.deleted_at, why.deleted_cause = first.get(DELETED_AT), first.get(DELETED_CAUSE)
        why.story.append(
            f"soft-deleted {why.deleted_at} (cause {why.deleted_cause}): hidden from every "
            "search, kept; restore_note (MCP_WRITE_TOOLS) or `ingest.py --restore` brings it back"
        )
        return
    why.state = "indexed"
    why.story.append(f"indexed in {name}: {why.chunks} passages, {why.indexed_at}")
    indexed, path = FileStat.stored(first), fresh.file_of(why.source, roots(settings))
    if indexed is not None and path is not None:
        why.stale = fresh.changed(path, indexed)
    if why.stale:
        why.state = "stale"
        why.story.append("stale: its file changed since it was indexed; the next sync updates it")


def _unindexed(why: Why, settings: Settings, file: Path, shown: str) -> None:
    """A listed file that is not in the index: waiting, private, failed (now or last sync)."""
    waiting = shown == why.source and why.source.split("/")[0] not in _folder_names(settings)
    logged = _logged_failure(settings, shown)
    try:
        note = read_note(file, why.source, max_bytes=settings.NOTE_MAX_BYTES)
        if not is_private(note, normalise_tags(settings.PRIVATE_TAGS)) and not chunk_note(note):
            raise NoteError(file, "no text to index")
    except NoteError as exc:
        why.state, why.failure = "failed", exc.reason
        why.story.append(f"not indexed: {shown}: {exc.reason}")
        return
    except OSError as exc:
        why.state, why.failure = "failed", f"cannot read it ({exc.strerror})"
        why.story.append(f"not indexed: {shown}: {why.failure}")
        return
    if is_private(note, normalise_tags(settings.PRIVATE_TAGS)):
        why.state = "private"
        why.story.append(f"{shown} is private (private: true or a PRIVATE_TAGS tag): never indexed")
    elif logged is not None:
        why.state, why.failure = "failed", logged
        why.story.append(f"the last sync failed it: {logged}; it reads fine now: sync again")
    elif waiting:
        why.state = "waiting"
        why.story.append(f"waiting in the inbox: {shown} is ingested by the next `ingest.py`")
    else:
        why.state = "waiting"
        why.story.append(f"{shown} is new or changed since the last sync: the next sync indexes it")


def _folder_names(settings: Settings) -> set[str]:
    return set(roots(settings)) - {INBOX}


def _logged_failure(settings: Settings, shown: str) -> str | None:
    for run in last_runs(settings.STATE_DIR).values():
        for failure in run.get("failed") or []:
            if isinstance(failure, dict) and failure.get("source") == shown:
                return str(failure.get("reason"))
    return None


def _ranked(
    why: Why, searcher: Searcher, query: str, filters: Filters, per_note: int | None
) -> None:
    """Where the note ranks in each mode, unfiltered, and what the search's filters did."""
    stores = searcher.collections()
    domain = next((d for d, (s, _) in stores.items() if s.collection == why.collection), "prose")
    store, client = stores[domain]
    mine = Filters(path=why.source)
    for mode in MODES:
        try:
            ranked = kb_query.search(store, client, query, kb_query.MAX_K, mode=mode, per_note=1)
            best = kb_query.search(store, client, query, 1, mode=mode, filters=mine, per_note=1)
        except (EmbedError, StoreError) as exc:
            why.story.append(f"{mode}: could not search ({exc})")
            continue
        place = next((i for i, h in enumerate(ranked, 1) if h.source == why.source), None)
        top = best[0] if best else None
        if top is None:
            why.ranks.append(ModeRank(mode, place, None, None))
        else:
            why.ranks.append(ModeRank(mode, place, round(top.score, 6), top.chunk_index,
                                      top.line_start, top.line_end))  # fmt: skip
        where = f"#{place} of the notes" if place else f"not in the best {kb_query.MAX_K} notes"
        lines = f" (best passage lines {top.line_start}-{top.line_end})" if top else ""
        why.story.append(f"{mode}: {where}{lines}")
    for spec in FILTERS:
        value = getattr(filters, spec.name)
        if value in (None, ()):
            continue
        if spec.name == "path":
            cut = why.source != value and not why.source.startswith(f"{value}/")
        else:
            alone = replace(Filters(path=why.source), **{spec.name: value})
            cut = store.count(alone.where()) == 0
        if cut:
            why.cut_by.append(spec.name)
            why.story.append(f"the filter {spec.name}={_shown(value)} leaves it out")
    if per_note and why.chunks > per_note:
        why.cut_by.append("per_note")
        why.story.append(
            f"per_note={per_note}: only its best {per_note} of {why.chunks} passages can show; "
            "per_note 0 ranks passages alone"
        )


def _shown(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, Sequence) and not isinstance(
        value, str
    ) else str(value)  # fmt: skip
