"""Is a result stale? `stale` compares a note's file now with what ingest recorded when it read it
(payload FILE_FIELDS: modification time, size, content hash): a different size is a change, the
same time and size is none, and only a file whose time alone changed is hashed again (touched,
or saved unchanged). Cheap: no store request (the hits' payloads hold it) and a stat per note.

A result is never marked stale on a guess: a video, a point written before these fields, a file
this process cannot see (another machine's folder) or a name that is not a plain path below its
folder is unknown (None). A file that is gone is stale: its note is about to be soft-deleted.
"""

from __future__ import annotations

import stat as stat_mode
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath

from kb.core.schema import INBOX, NOTE, FileStat, Hit


def file_of(source: str, roots: Mapping[str, Path]) -> Path | None:
    """Where the note `source` is read from: a NOTE_FOLDERS folder's note under that folder (its
    first part names it), any other under the inbox's ingested/ (roots[INBOX])."""
    parts = PurePosixPath(source).parts
    if not parts or source.startswith("/") or ".." in parts or "\\" in source:
        return None
    if len(parts) > 1 and parts[0] in roots and parts[0] != INBOX:
        return roots[parts[0]].joinpath(*parts[1:])
    inbox = roots.get(INBOX)
    return inbox.joinpath(*parts) if inbox is not None else None


def changed(path: Path, indexed: FileStat) -> bool | None:
    """Whether the file at `path` differs from `indexed` (None: it cannot be told)."""
    try:
        now = path.lstat()
    except FileNotFoundError:
        return True
    except OSError:
        return None
    if not stat_mode.S_ISREG(now.st_mode):
        return None  # a link or another kind of file: ingest would not read it either
    if now.st_size != indexed.size:
        return True
    if now.st_mtime_ns == indexed.mtime_ns:
        return False
    current = FileStat.of(path)
    return None if current is None else current.sha256 != indexed.sha256


def mark(
    hits: Sequence[Hit], recorded: Mapping[tuple[str, str], FileStat], roots: Mapping[str, Path]
) -> list[Hit]:
    """`hits` with `stale` set where it can be told; `recorded`: what ingest recorded of each
    note's file by (domain, source), read from the hits' own payloads (every chunk of a note
    carries it: kb.store.points.Found)."""
    if not roots:
        return list(hits)
    verdict: dict[tuple[str, str], bool | None] = {}
    for hit in hits:
        if hit.kind != NOTE or not hit.source or (hit.domain, hit.source) in verdict:
            continue
        indexed, path = recorded.get((hit.domain, hit.source)), file_of(hit.source, roots)
        verdict[hit.domain, hit.source] = (
            changed(path, indexed) if indexed is not None and path is not None else None
        )
    return [
        replace(h, stale=verdict.get((h.domain, h.source or ""))) if h.source else h for h in hits
    ]
