"""Compare what a source holds now with what the collection stores: write, unchanged, gone.

Both sides are {note: {point id: fingerprint}}. A note is unchanged only when its stored points
are exactly the points it would get now, each carrying the fingerprint it would get now
(kb.core.schema.fingerprint: the note's text, metadata, model and layout); anything else (a new
note, an edit, a chunk more or less, a point written by an older version) is written again.
A stored note the source no longer holds is gone: only a full listing can say that.

A soft-deleted note (kb.store.points.fingerprints marks its points with DELETED_MARK) is never
unchanged and never gone again: listed once more with exactly its stored points, it is restored
(its points made visible, nothing embedded); listed changed, it is written again.

A note restored by hand (kb.ingest.lifecycle; RESTORED_MARK) is never gone: its file stays away on
purpose. Once its file is listed again the mark is settled (cleared, nothing embedded) so a
later deletion of the file counts again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kb.core.schema import DELETED_MARK, RESTORED_MARK

Points = Mapping[str, str]  # point id -> fingerprint


@dataclass
class Plan:
    write: list[str] = field(default_factory=list)  # notes to embed and write, in listing order
    unchanged: list[str] = field(default_factory=list)  # stored exactly so already
    gone: list[str] = field(default_factory=list)  # stored, but their item is gone
    restore: list[str] = field(default_factory=list)  # soft-deleted, back exactly as stored
    settle: list[str] = field(default_factory=list)  # restored by hand, and listed again


def deleted(points: Points) -> bool:
    """Whether these stored points are a soft-deleted note's."""
    return bool(points) and all(h.startswith(DELETED_MARK) for h in points.values())


def kept(points: Points) -> bool:
    """Whether these stored points are a note restored by hand (never gone, see above)."""
    return bool(points) and all(h.startswith(RESTORED_MARK) for h in points.values())


def plan(
    wanted: Mapping[str, Points],
    stored: Mapping[str, Points],
    *,
    full: bool = False,
    holds: Callable[[str], bool] = lambda source: True,
) -> Plan:
    """What to do for each note. `wanted` lists the notes read this run; with `full` (it lists
    everything the source holds) a stored note missing from it is gone unless `holds(note)` says
    its item is still there (e.g. unreadable this time: its points are kept)."""
    result = Plan()
    for source, points in wanted.items():
        have = stored.get(source, {})
        if kept(have):
            result.settle.append(source)
            have = {p: h.removeprefix(RESTORED_MARK) for p, h in have.items()}
        if have == points:
            result.unchanged.append(source)
        elif deleted(have) and {p: h.removeprefix(DELETED_MARK) for p, h in have.items()} == points:
            result.restore.append(source)
        else:
            result.write.append(source)
    if full:
        result.gone = sorted(
            s for s, points in stored.items() if s not in wanted and not deleted(points)
            and not kept(points) and not holds(s)
        )  # fmt: skip
    return result
