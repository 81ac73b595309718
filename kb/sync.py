"""Compare what a source holds now with what the collection stores: write, unchanged, gone.

Both sides are {note: {point id: fingerprint}}. A note is unchanged only when its stored points
are exactly the points it would get now, each carrying the fingerprint it would get now
(kb.schema.fingerprint: the note's text, metadata, model and layout); anything else (a new
note, an edit, a chunk more or less, a point written by an older version) is written again.
A stored note the source no longer holds is gone: only a full listing can say that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Points = Mapping[str, str]  # point id -> fingerprint


@dataclass
class Plan:
    write: list[str] = field(default_factory=list)  # notes to embed and write, in listing order
    unchanged: list[str] = field(default_factory=list)  # stored exactly so already
    gone: list[str] = field(default_factory=list)  # stored, but their item is gone


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
        (result.unchanged if stored.get(source) == points else result.write).append(source)
    if full:
        result.gone = sorted(s for s in stored if s not in wanted and not holds(s))
    return result
