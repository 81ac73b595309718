"""The mass-deletion guard: a sync of a complete source (a NOTE_FOLDERS folder, a playlist) that
would soft-delete more than NOTE_FOLDERS_MAX_DELETE of its notes stops before anything changes,
unless deletes are allowed (`ingest.py --allow-deletes`): an unmounted drive, another branch
checked out, a playlist emptied by mistake look like every note deleted.

`check_sources` runs for every complete source whose listing is local (a folder) before any
source changes anything; each source's own sync checks again against what it read
(kb.ingest.run), the only check of a remote one (a playlist: listing it spends quota). The
source says what is gone in its own words (`Source.too_many_gone`).
"""

from __future__ import annotations

from collections.abc import Sequence

from kb.core.errors import IngestError, ModelMismatch
from kb.ingest import plan as sync
from kb.sources.base import Source
from kb.sources.domain import Listed
from kb.store import collection
from kb.store.points import Store


def check_deletes(
    source: Source, gone: int, stored: dict[str, dict[str, str]], share: float
) -> None:
    """IngestError when soft-deleting `gone` notes of a source whose `stored` notes (some maybe
    soft-deleted already) is more than `share` of them (and more than one). Nothing has
    changed yet."""
    live = sum(1 for points in stored.values() if not sync.deleted(points))
    if gone > max(1.0, share * live):
        raise IngestError(
            f"{source.too_many_gone(gone, live)}: more than NOTE_FOLDERS_MAX_DELETE={share:g}; "
            "nothing was changed. If that is right, confirm with "
            "`uv run ingest.py --allow-deletes`"
        )


def check_sources(sources: Sequence[Listed], store: Store, share: float) -> None:
    """The guard for every complete source of `sources` with a local listing, against what
    `store` holds of each, before any source changes anything (the listings are the ones the
    run then syncs)."""
    complete = [s for s in sources if s.source.complete and s.source.local_listing]
    try:
        if not complete or collection.info(store) is None:
            return
    except ModelMismatch:
        return  # not our collection: the run says so (or --rebuild re-creates it)
    for listed in complete:
        source = listed.source
        names = {item.source for item in listed.listing(everything=True).items}
        stored = store.fingerprints(origin=source.origin)
        gone = [
            name for name, points in stored.items()
            if name not in names and not sync.deleted(points) and not sync.kept(points)
            and not source.holds(name)
        ]  # fmt: skip
        if gone:
            check_deletes(source, len(gone), stored, share)
