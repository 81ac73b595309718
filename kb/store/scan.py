"""The Store's reads that page through its collection (scroll), one filter's worth each: one
row per note, fingerprints, the backlinks of a few notes, a note's dense vectors, a listing
ordered by a text field. The Store (kb.store.points) keeps their public names and splits long
lists of note names into batches; the functions here take its engine and collection.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from kb.core.schema import (
    ALIASES,
    DELETED_AT,
    DELETED_CAUSE,
    DELETED_MARK,
    DENSE,
    EMBEDDING,
    LINKS,
    NOTE_HASH,
    ORIGIN,
    PAYLOAD_INDEXES,
    PENDING_MARK,
    RESTORED_AT,
    RESTORED_MARK,
    SOURCE,
)
from kb.store.engine import Engine, Fields, Payload, Record
from kb.store.models import models
from kb.store.query import first_chunks, linking_to, origin_filter, source_filter, visible

SCROLL_PAGE = 2048  # points per scroll page when only a few small payload fields are read


def scroll(
    engine: Engine,
    collection: str,
    flt: models.Filter | None,
    payload: Fields,
    *,
    limit: int = SCROLL_PAGE,
    vectors: Fields = False,
) -> Iterator[Record]:
    """Every point matching `flt`, page by page, with these payload fields (and vectors)."""
    offset: str | None = None
    while True:
        records, offset = engine.scroll(
            collection, flt, limit=limit, offset=offset, payload=payload, vectors=vectors
        )
        yield from records
        if offset is None:
            return


def deleted_notes(engine: Engine, collection: str, where: models.Filter) -> list[Payload]:
    """The lifecycle fields of the first chunk of every note matching `where`, by source."""
    fields = [SOURCE, ORIGIN, DELETED_AT, DELETED_CAUSE]
    found = [r.payload for r in scroll(engine, collection, first_chunks(where), fields)]
    return sorted(found, key=lambda p: str(p.get(SOURCE)))


def read_fingerprints(
    engine: Engine, collection: str, flt: models.Filter | None, out: dict[str, dict[str, str]]
) -> None:
    """Add {source: {point id: its marks + note_hash}} of the points matching `flt` to `out`."""
    fields = [SOURCE, NOTE_HASH, DELETED_AT, RESTORED_AT, EMBEDDING]
    for r in scroll(engine, collection, flt, fields):
        source = r.payload.get(SOURCE)
        if isinstance(source, str):
            note_hash = r.payload.get(NOTE_HASH)
            deleted, restored = r.payload.get(DELETED_AT), r.payload.get(RESTORED_AT)
            mark = DELETED_MARK if deleted else RESTORED_MARK if restored else ""
            mark += PENDING_MARK if r.payload.get(EMBEDDING) else ""
            out.setdefault(source, {})[r.id] = mark + (
                note_hash if isinstance(note_hash, str) else ""
            )


def notes(
    engine: Engine, collection: str, fields: Sequence[str], where: models.Filter | None
) -> list[Payload]:
    """These payload fields of the first chunk of every live note matching `where`, by source."""
    flt = visible(first_chunks(where))
    found = [r.payload for r in scroll(engine, collection, flt, [SOURCE, *fields])]
    return sorted(found, key=lambda p: str(p.get(SOURCE)))


def note_aliases(engine: Engine, collection: str, origin: str) -> dict[str, list[str]]:
    """{source: aliases} of the live notes of one origin."""
    out: dict[str, list[str]] = {}
    for payload in notes(engine, collection, [ALIASES], origin_filter(origin)):
        aliases = payload.get(ALIASES)
        listed = [a for a in aliases if isinstance(a, str)] if isinstance(aliases, list) else []
        out[str(payload.get(SOURCE))] = listed
    return out


def dense_vectors(engine: Engine, collection: str, source: str) -> list[list[float]]:
    """The dense vectors of a note's chunks."""
    vectors: list[list[float]] = []
    for r in scroll(engine, collection, source_filter([source]), False, vectors=[DENSE]):
        vector = r.vectors.get(DENSE)
        if isinstance(vector, list):
            vectors.append([float(x) for x in vector])
    return vectors


def backlink_counts(engine: Engine, collection: str, sources: list[str]) -> dict[str, int]:
    """How many live notes link to each of `sources`: the links of every note linking to any
    of them, counted here (each note once per target, as a count of its first chunk would)."""
    counts = dict.fromkeys(sources, 0)
    linking = visible(first_chunks(linking_to(sources)))
    for r in scroll(engine, collection, linking, [LINKS]):
        links = r.payload.get(LINKS)
        for target in set(links) if isinstance(links, list) else ():
            if target in counts:
                counts[target] += 1
    return counts


def payloads(engine: Engine, collection: str, source: str | None) -> list[tuple[str, Payload]]:
    """(id, payload) of every point (of one source)."""
    flt = source_filter([source]) if source is not None else None
    return [(r.id, r.payload) for r in scroll(engine, collection, flt, True, limit=256)]


def browse(
    engine: Engine,
    collection: str,
    where: models.Filter | None,
    order_by: str,
    *,
    descending: bool,
    limit: int,
    offset: int,
) -> list[Payload]:
    """The payloads of the points matching `where` ordered by one payload field, `offset` of
    them skipped (the Store's `browse` says how)."""
    if PAYLOAD_INDEXES.get(order_by, "keyword") != "keyword":
        direction = models.Direction.DESC if descending else models.Direction.ASC
        records, _ = engine.scroll(
            collection, where, limit=offset + limit,
            order_by=models.OrderBy(key=order_by, direction=direction),
        )  # fmt: skip
        return [r.payload for r in records[offset:]]
    # a field without a range index: ordered here, reading that field alone of every point
    keys = [(r.payload.get(order_by), r.id) for r in scroll(engine, collection, where, [order_by])]
    ordered = sorted(
        ((str(v).casefold(), i) for v, i in keys if isinstance(v, str)), reverse=descending
    )
    ids = [i for _, i in ordered[offset : offset + limit]]
    found = {r.id: r for r in engine.retrieve(collection, ids)}
    return [found[i].payload for i in ids if i in found]
