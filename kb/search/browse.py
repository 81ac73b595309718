"""Browse the stored notes and videos with no query: filtered, ordered by a field, paged, or
only counted. Shared by the MCP tool `browse_notes` and query.py's `--browse`.

One row per note or video (its first chunk), through the store's `browse` (Qdrant's scroll with
order_by) and `count`. Ordering by a video's field (uploaded, views, duration) lists videos
only: a note has no such value, and the count says how many have one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, get_args

from kb.core.schema import (
    DATE_INGESTED,
    DURATION_S,
    TITLE,
    UPLOADED,
    VIEW_COUNT,
    Hit,
)
from kb.search import paths
from kb.search.filters import Filters
from kb.store import collection
from kb.store.points import Store
from kb.store.query import listing_filter

OrderBy = Literal["uploaded", "ingested", "views", "duration", "title"]
ORDER_BY: dict[str, str] = {
    "uploaded": UPLOADED,
    "ingested": DATE_INGESTED,
    "views": VIEW_COUNT,
    "duration": DURATION_S,
    "title": TITLE,
}
assert set(ORDER_BY) == set(get_args(OrderBy))
Order = Literal["asc", "desc"]
MAX_LIMIT = 100
MAX_OFFSET = 10_000


@dataclass(frozen=True)
class Browsed:
    total: int  # every note or video matching the filters (with a value to order by)
    items: list[Hit]  # the page asked for, in order (empty with count_only)


def browse(
    store: Store,
    filters: Filters | None = None,
    *,
    order_by: OrderBy = "ingested",
    order: Order = "desc",
    limit: int = 20,
    offset: int = 0,
    count_only: bool = False,
) -> Browsed:
    """A page of notes and videos matching `filters`, ordered by `order_by`, and how many match.

    Raises ValueError for an unknown order, a limit outside 1..MAX_LIMIT or an offset outside
    0..MAX_OFFSET; CollectionMissing before anything was ingested."""
    if order_by not in ORDER_BY:
        raise ValueError(f"order_by must be one of {', '.join(ORDER_BY)}, got {order_by!r}")
    if order not in get_args(Order):
        raise ValueError(f"order must be asc or desc, got {order!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if not 0 <= offset <= MAX_OFFSET:
        raise ValueError(f"offset must be between 0 and {MAX_OFFSET}, got {offset}")
    collection.require(store)
    key = ORDER_BY[order_by]
    filters = filters or Filters()
    if filters.path:  # as the index names it (kb.search.paths); none found: nothing listed
        filters = replace(filters, path=paths.resolve([store], filters.path).path)
    # one row per note, with a value to order by: the count matches what order_by can list
    flt = listing_filter(filters.where(), key)
    total = store.count(flt)
    if count_only:
        return Browsed(total, [])
    items = store.browse(flt, order_by=key, descending=order == "desc", limit=limit, offset=offset)
    return Browsed(total, items)
