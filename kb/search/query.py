"""Search the stored chunks (hybrid, semantic or keyword, with filters), and the tags in use.

Shared by query.py and the MCP server, so both accept the same options and return the same
fields.

Modes: `hybrid` (default) scores each chunk by its cosine similarity plus a keyword (BM25)
bonus, so a paraphrase and an exact identifier, acronym or name are both found (see
kb.store.query.fusion); `semantic` is the dense ranking alone, `keyword` the BM25 ranking
alone. Results are collapsed to `per_note` chunks per note (default 1: ten results are ten
different notes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Literal, NamedTuple, get_args

from kb.content.notes import normalise_tags
from kb.core.schema import (
    CATEGORIES,
    CHANNEL,
    DATE_INGESTED,
    DOCUMENT_DATE,
    DURATION_S,
    LANGUAGE,
    NOTE,
    UPLOADED,
    VIDEO,
    Hit,
)
from kb.embedding.keywords import query_vector
from kb.store import collection
from kb.store.points import Store
from kb.store.query import FUSIONS, HYBRID_FUSION, DateRange, Fusion, payload_filter

if TYPE_CHECKING:
    from qdrant_client.models import Filter as QdrantFilter

    from kb.embedding.client import EmbedClient

__all__ = [
    "MAX_ALTERNATES",
    "MAX_K",
    "MODES",
    "Filters",
    "Hit",
    "Mode",
    "TagUsage",
    "alternate_modes",
    "search",
    "tag_usage",
]

MAX_K = 100
Mode = Literal["hybrid", "semantic", "keyword"]
MODES: tuple[str, ...] = get_args(Mode)
KINDS = (NOTE, VIDEO)
MAX_ALTERNATES = 5
# An alternate phrasing starting with one of these is searched in that mode alone.
ALTERNATE_PREFIXES: dict[str, Mode] = {"keyword:": "keyword", "semantic:": "semantic"}


def alternate_modes(alternates: Sequence[str], mode: Mode) -> list[tuple[str, Mode]]:
    """(text, mode) of each alternate phrasing: `keyword: ...` and `semantic: ...` pick a mode,
    any other follows the search's `mode`. ValueError naming `alternates[i]` when one is empty."""
    if len(alternates) > MAX_ALTERNATES:
        raise ValueError(f"alternates: at most {MAX_ALTERNATES} phrasings, got {len(alternates)}")
    out: list[tuple[str, Mode]] = []
    for index, raw in enumerate(alternates):
        text, own = raw.strip(), mode
        for prefix, prefixed in ALTERNATE_PREFIXES.items():
            if text.lower().startswith(prefix):
                text, own = text[len(prefix) :].strip(), prefixed
        if not text:
            raise ValueError(f"alternates[{index}] is empty")
        out.append((text, own))
    return out


def _when(name: str, value: str | date | None, *, end: bool) -> tuple[datetime | None, bool]:
    """A filter bound as a UTC datetime, and whether it is exclusive (a bare end date means
    the whole day: up to the next midnight)."""
    if value is None or value == "":
        return None, False
    if isinstance(value, datetime):
        moment, day = value, None
    elif isinstance(value, date):
        moment, day = None, value
    else:
        text = str(value).strip()
        try:
            moment, day = None, date.fromisoformat(text)
        except ValueError:
            try:
                moment, day = datetime.fromisoformat(text), None
            except ValueError:
                raise ValueError(
                    f"{name}: {value!r} is not an ISO date or datetime "
                    "(e.g. 2024-03-01 or 2024-03-01T14:30)"
                ) from None
    if day is not None:
        if end:
            return datetime.combine(day + timedelta(days=1), time(), UTC), True
        return datetime.combine(day, time(), UTC), False
    assert moment is not None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)), False


@dataclass(frozen=True)
class Filters:
    """Conditions every result meets; all optional, combined with AND.

    Dates are ISO dates or datetimes (naive ones are UTC); a bare `..._to` date includes that
    whole day. Tags are normalised like frontmatter tags. Construction raises ValueError
    naming the field and the value at fault.
    """

    tags_any: Sequence[str] = ()  # at least one of these tags
    tags_all: Sequence[str] = ()  # every one of these tags
    date_from: str | None = None  # document_date >= this
    date_to: str | None = None  # document_date <= this
    ingested_from: str | None = None  # date_ingested >= this
    ingested_to: str | None = None  # date_ingested <= this
    path_prefix: str | None = None  # a folder ("recipes/", any depth below) or one note's path
    # what kind of item, and a video's fields (kb.sources.youtube.playlist); a note has none of
    # these
    kind: str | None = None  # "note" or "video"
    channel: str | None = None  # a video's channel, exactly as results show it
    min_duration: int | str | None = None  # seconds, or "10m", "1h30m", "90s"
    max_duration: int | str | None = None
    uploaded_from: str | None = None  # upload date >= this
    uploaded_to: str | None = None  # upload date <= this
    language: str | None = None  # "en", "ja" (a tag like "en-US" counts as "en")
    category: str | None = None  # a topic category, e.g. "Chess"

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        for name in ("min_duration", "max_duration"):
            object.__setattr__(self, name, seconds(name, getattr(self, name)))
        low, high = self.min_duration, self.max_duration
        if isinstance(low, int) and isinstance(high, int) and low > high:
            raise ValueError(f"min_duration {low}s is more than max_duration {high}s")
        if self.language:
            object.__setattr__(self, "language", self.language.strip().split("-")[0].lower())
        for name in ("channel", "category", "language"):
            object.__setattr__(self, name, (getattr(self, name) or "").strip() or None)
        for name in ("tags_any", "tags_all"):
            try:
                object.__setattr__(self, name, tuple(normalise_tags(getattr(self, name))))
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        path = (self.path_prefix or "").strip().removeprefix("./").strip("/")
        object.__setattr__(self, "path_prefix", path or None)
        self.date_ranges()  # validates the dates now rather than at search time

    def date_ranges(self) -> list[DateRange]:
        """The document_date and date_ingested bounds as UTC datetimes."""
        ranges = []
        for prefix, key in (
            ("date", DOCUMENT_DATE),
            ("ingested", DATE_INGESTED),
            ("uploaded", UPLOADED),
        ):
            first, last = getattr(self, f"{prefix}_from"), getattr(self, f"{prefix}_to")
            start, _ = _when(f"{prefix}_from", first, end=False)
            end, exclusive = _when(f"{prefix}_to", last, end=True)
            if (
                start is not None
                and end is not None
                and (start >= end if exclusive else start > end)
            ):
                raise ValueError(f"{prefix}_from {first!r} is after {prefix}_to {last!r}")
            if start is not None or end is not None:
                ranges.append(DateRange(key, start, end, end_exclusive=exclusive))
        return ranges

    def where(self) -> QdrantFilter | None:
        """The Qdrant filter for these conditions (None when there are none)."""
        return payload_filter(
            tags_any=tuple(self.tags_any),
            tags_all=tuple(self.tags_all),
            dates=self.date_ranges(),
            path=self.path_prefix,
            kind=self.kind,
            keywords=[(key, value) for key, value in ((CHANNEL, self.channel),
                      (LANGUAGE, self.language), (CATEGORIES, self.category)) if value],
            numbers=[(DURATION_S, seconds("min_duration", self.min_duration),
                      seconds("max_duration", self.max_duration))],
        )  # fmt: skip


_DURATION = re.compile(r"(?:(\d+)\s*h)?\s*(?:(\d+)\s*m(?:in)?)?\s*(?:(\d+)\s*s)?", re.I)


def seconds(name: str, value: int | str | None) -> int | None:
    """A duration as whole seconds: 600, "600", "10m", "1h30m", "90s"; ValueError naming
    `name` otherwise."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        found: int | None = value
    else:
        text = str(value).strip()
        match = _DURATION.fullmatch(text)
        if text.isdigit():
            found = int(text)
        elif match and any(match.groups()):
            hours, minutes, secs = (int(g) if g else 0 for g in match.groups())
            found = hours * 3600 + minutes * 60 + secs
        else:
            found = None
    if found is None or found < 0:
        raise ValueError(f"{name}: {value!r} is not a duration (seconds, or e.g. 10m, 1h30m)")
    return found


def search(
    store: Store,
    client: EmbedClient,
    query: str,
    k: int = 5,
    tags: Sequence[str] | str | None = None,
    *,
    mode: Mode = "hybrid",
    filters: Filters | None = None,
    per_note: int | None = 1,
    alternates: Sequence[str] = (),
    fusion: Fusion = HYBRID_FUSION,
) -> list[Hit]:
    """The `k` best chunks for `query`, at most `per_note` from each note (None or 0: no limit).

    `alternates`: more phrasings of the same need (keywords, a paraphrase, a hypothetical
    answer), each searched like the query (or in the mode its `keyword:` / `semantic:` prefix
    names) and fused with it by reciprocal rank in the same store call; scores are then RRF
    scores. All query vectors come from one embedder request.

    `fusion` merges a hybrid search's two rankings (kb.store.query.FUSIONS): query.py and the
    MCP server always use the default; the others are references bench/retrieval.py compares.

    `tags` (kept for older callers) is the same as `filters.tags_any`; both together mean any
    of either. Raises ValueError for an empty query, k outside 1..MAX_K, an unknown mode or a
    negative per_note; EmbedError when the embedder fails; StoreError (CollectionMissing,
    ModelMismatch, KeywordIndexMissing, StoreUnavailable) from Qdrant.
    """
    if not query.strip():
        raise ValueError("query is empty")
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be between 1 and {MAX_K}, got {k}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
    if per_note is not None and per_note < 0:
        raise ValueError(f"per_note must be 1 or more (0 or None: no limit), got {per_note}")
    filters = filters or Filters()
    if tags:
        filters = replace(filters, tags_any=(*filters.tags_any, *normalise_tags(tags)))
    phrasings = [(query, mode), *alternate_modes(alternates, mode)]
    dense_texts = [text for text, own in phrasings if own != "keyword"]
    vectors: list[list[float]] = []
    if dense_texts:  # keyword search needs no embedder: it works while that one is down
        collection.check_model(store, client.model, client.dimensions)
        vectors = (
            [client.embed_query(query)] if len(dense_texts) == 1 and not alternates
            else client.embed_queries(dense_texts)
        )  # fmt: skip
    if any(own != "semantic" for _, own in phrasings):
        collection.require_keyword(store)
    found = iter(vectors)
    searched = [
        (
            next(found) if own != "keyword" else None,
            query_vector(text) if own != "semantic" else None,
        )
        for text, own in phrasings
    ]
    (dense, keyword), others = searched[0], searched[1:]
    return store.query(
        k,
        dense=dense,
        keyword=keyword,
        where=filters.where(),
        per_note=per_note,
        alternates=others,
        fusion=fusion,
    )


class TagUsage(NamedTuple):
    tag: str
    chunks: int  # chunks (passages) carrying the tag
    notes: int  # notes carrying the tag


def tag_usage(store: Store) -> list[TagUsage]:
    """Every tag with the number of chunks and of notes carrying it (two facet calls), most
    chunks first, then by name (CollectionMissing if nothing was ingested yet)."""
    collection.require(store)
    notes = dict(store.tag_counts())
    chunks = store.tag_counts(per="chunk")
    return [TagUsage(tag, n, notes.get(tag, 0)) for tag, n in chunks]
