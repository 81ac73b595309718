"""The search filters, written once: each is one field of `Filters`, declared with `row(...)`.

A row names the filter once: that name is the `Filters` attribute, the MCP tools' argument
(search_notes, browse_notes, answer_question) and query.py's option (`--all-tags`; `option=`
keeps a spelling that differs, `--from`). Its test says what it keeps (and so its value's shape:
tags, an ISO date, a duration, a word), `help` is its one line for the tools' schemas, query.py's
`--help` and the docs, and `group` puts it with the notes' or the videos' filters. `FILTERS` lists
the rows; query.py's options, the tools' parameters and the docs' tables are built from it
(tests/project/test_readme.py keeps README's table in step).

A new filter is one row here; its condition is built from its test and payload field
(kb.store.query.payload_filter), so a test that exists already needs nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Literal, TypeVar

from kb.content.notes import normalise_tags
from kb.core.schema import (
    CATEGORIES,
    CHANNEL,
    DATE_INGESTED,
    DOCUMENT_DATE,
    DURATION_S,
    EMAIL,
    FOLDER_KEYS,
    LANGUAGE,
    NOTE,
    RECIPIENTS,
    SENDER,
    UPLOADED,
    VIDEO,
    WEB,
    folder_key,
)
from kb.store.query import DateRange, payload_filter

if TYPE_CHECKING:
    from qdrant_client.models import Filter as QdrantFilter

__all__ = ["FILTERS", "KINDS", "FilterError", "FilterField", "Filters", "seconds"]

# What a filter keeps, which also fixes the shape of its value (FilterField.value).
Test = Literal[
    "any_tag", "every_tag", "since", "until", "folder", "kind", "equals", "least", "most",
    "within", "address",
]  # fmt: skip
Value = Literal["tags", "date", "text", "kind", "duration"]
Group = Literal["notes", "videos", "web", "mail"]
VALUES: dict[Test, Value] = {
    "any_tag": "tags", "every_tag": "tags", "since": "date", "until": "date", "folder": "text",
    "equals": "text", "kind": "kind", "least": "duration", "most": "duration", "within": "text",
    "address": "text",
}  # fmt: skip
KINDS = (NOTE, VIDEO, WEB, EMAIL)
_ROW = "filter"  # the key of a row in its dataclass field's metadata
T = TypeVar("T")


@dataclass(frozen=True)
class _Row:
    test: Test
    help: str
    payload: str
    group: Group
    option: str


def row(
    default: T,
    test: Test,
    payload: str = "",
    *,
    help: str,
    group: Group = "notes",
    option: str = "",
) -> T:
    """One filter: a `Filters` field with its test, the payload field it tests, its help line,
    its group and query.py's spelling of it when that is not `--name-with-dashes`."""
    return field(default=default, metadata={_ROW: _Row(test, help, payload, group, option)})


@dataclass(frozen=True)
class FilterField:
    """A filter as the interfaces built from the table see it."""

    name: str  # the Filters attribute and the MCP argument
    test: Test
    help: str  # one line
    payload: str  # the payload field it tests (kb.core.schema), "" where the test knows it
    group: Group
    option: str  # query.py's option as it is spelled in errors and docs

    @property
    def value(self) -> Value:
        return VALUES[self.test]

    @property
    def options(self) -> tuple[str, ...]:
        """query.py's spellings: `option` first, then the name with dashes."""
        plain = "--" + self.name.replace("_", "-")
        return (self.option,) if self.option == plain else (self.option, plain)


@dataclass(frozen=True)
class _Name:
    name: str


class FilterError(ValueError):
    """A filter's value is refused. str() names filters as the MCP tools do (their names);
    `spelled(option)` names them as another interface does (query.py: its options)."""

    def __init__(self, *parts: str | _Name) -> None:
        self.parts = parts
        super().__init__(self.spelled(lambda name: name))

    def spelled(self, spell: Callable[[str], str]) -> str:
        return "".join(spell(p.name) if isinstance(p, _Name) else p for p in self.parts)


def _bad(name: str, detail: str) -> FilterError:
    return FilterError(_Name(name), f": {detail}")


@dataclass(frozen=True)
class Filters:
    """Conditions every result meets; all optional, combined with AND.

    Dates are ISO dates or datetimes (naive ones are UTC); a bare `..._to` date includes that
    whole day. Tags are normalised like frontmatter tags. Construction raises FilterError (a
    ValueError) naming the filter and the value at fault.
    """

    # fmt: off
    # the notes' filters (every item has these fields)
    tags: Sequence[str] = row((), "any_tag", help="Notes with any of these tags.")
    all_tags: Sequence[str] = row((), "every_tag", help="Notes with all of these tags.")
    date_from: str | None = row(None, "since", DOCUMENT_DATE, option="--from",
        help="Notes dated (document_date) on or after this ISO date.")
    date_to: str | None = row(None, "until", DOCUMENT_DATE, option="--to",
        help="Notes dated on or before this ISO date.")
    ingested_from: str | None = row(None, "since", DATE_INGESTED,
        help="Notes ingested on or after this ISO date.")
    ingested_to: str | None = row(None, "until", DATE_INGESTED,
        help="Notes ingested on or before this ISO date.")
    path: str | None = row(None, "folder",
        help="Notes in this folder ('recipes/', any depth) or this one file.")
    language: str | None = row(None, "equals", LANGUAGE,
        help="Passages in this language (en, de, ja): a note's `lang`, else detected.")
    # the videos' filters (kb.sources.youtube.playlist; a note has none of these fields)
    kind: str | None = row(None, "kind", group="videos",
        help="Only notes (files), videos (saved YouTube videos), web pages or email.")
    channel: str | None = row(None, "equals", CHANNEL, group="videos",
        help="Videos of this channel (its exact name).")
    min_duration: int | str | None = row(None, "least", DURATION_S, group="videos",
        help="Videos at least this long: seconds, or '10m', '1h30m'.")
    max_duration: int | str | None = row(None, "most", DURATION_S, group="videos",
        help="Videos at most this long.")
    uploaded_from: str | None = row(None, "since", UPLOADED, group="videos",
        help="Videos uploaded on or after this ISO date.")
    uploaded_to: str | None = row(None, "until", UPLOADED, group="videos",
        help="Videos uploaded on or before this ISO date.")
    category: str | None = row(None, "equals", CATEGORIES, group="videos",
        help="Videos of this topic category (e.g. Chess).")
    # the web pages' filters (kb.sources.web): `within` matches a path of folders, any depth
    folder: str | None = row(None, "within", FOLDER_KEYS, group="web",
        help="Bookmarks in this browser folder ('read later', any depth, any case).")
    # the messages' filters (kb.sources.mail): an address, any case
    sender: str | None = row(None, "address", SENDER, group="mail",
        help="Messages from this address (ana@example.com).")
    recipient: str | None = row(None, "address", RECIPIENTS, group="mail",
        help="Messages to or cc'd to this address.")
    # fmt: on

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in KINDS:
            choices = ", ".join(KINDS)
            raise FilterError(_Name("kind"), f" must be one of {choices}, got {self.kind!r}")
        if self.language:
            object.__setattr__(self, "language", self.language.strip().split("-")[0].lower())
        path = (self.path or "").strip().removeprefix("./").strip("/")
        object.__setattr__(self, "path", path or None)
        for spec in FILTERS:
            value = getattr(self, spec.name)
            if spec.value == "tags":
                try:
                    object.__setattr__(self, spec.name, tuple(normalise_tags(value)))
                except ValueError as exc:
                    raise _bad(spec.name, str(exc)) from None
            elif spec.value == "duration":
                object.__setattr__(self, spec.name, seconds(spec.name, value))
            elif spec.test == "equals":
                object.__setattr__(self, spec.name, (value or "").strip() or None)
            elif spec.test == "address":
                object.__setattr__(self, spec.name, (value or "").strip().lower() or None)
            elif spec.test == "within":
                object.__setattr__(self, spec.name, folder_key(value or "") or None)
        self._bounds()  # the ranges are checked now rather than at search time
        self.date_ranges()

    def _bounds(self) -> list[tuple[str, int | None, int | None]]:
        """(payload field, least, most) of each least/most pair; FilterError if least > most."""
        out = []
        for low in (f for f in FILTERS if f.test == "least"):
            [high] = [f for f in FILTERS if f.test == "most" and f.payload == low.payload]
            least, most = getattr(self, low.name), getattr(self, high.name)
            if least is not None and most is not None and least > most:
                raise FilterError(_Name(low.name), f" {least}s is more than ", _Name(high.name),
                                  f" {most}s")  # fmt: skip
            out.append((low.payload, least, most))
        return out

    def date_ranges(self) -> list[DateRange]:
        """The bounds of each since/until pair (document_date, date_ingested, uploaded) as UTC
        datetimes; FilterError for a value that is not ISO or a range that ends before it starts."""
        ranges = []
        for since in (f for f in FILTERS if f.test == "since"):
            [until] = [f for f in FILTERS if f.test == "until" and f.payload == since.payload]
            first, last = getattr(self, since.name), getattr(self, until.name)
            start, _ = _when(since.name, first, end=False)
            end, exclusive = _when(until.name, last, end=True)
            if (
                start is not None
                and end is not None
                and (start >= end if exclusive else start > end)
            ):
                raise FilterError(_Name(since.name), f" {first!r} is after ", _Name(until.name),
                                  f" {last!r}")  # fmt: skip
            if start is not None or end is not None:
                ranges.append(DateRange(since.payload, start, end, end_exclusive=exclusive))
        return ranges

    def where(self) -> QdrantFilter | None:
        """The Qdrant filter for these conditions (None when there are none)."""
        keywords = [
            (f.payload, getattr(self, f.name))
            for f in FILTERS
            if f.test in ("equals", "within", "address")
        ]
        return payload_filter(
            tags_any=tuple(self.tags),
            tags_all=tuple(self.all_tags),
            dates=self.date_ranges(),
            path=self.path,
            kind=self.kind,
            keywords=[(key, value) for key, value in keywords if value],
            numbers=self._bounds(),
        )

    def arguments(self) -> dict[str, object]:
        """The filters that are set, by name, as the MCP tools take them (kb.app.remote)."""
        out: dict[str, object] = {}
        for spec in FILTERS:
            value = getattr(self, spec.name)
            if value not in (None, ()):
                out[spec.name] = list(value) if spec.value == "tags" else value
        return out

    def count(self) -> int:
        """How many filters are set (the tools log it)."""
        return len(self.arguments())


def _spec(name: str, metadata: object) -> FilterField:
    assert isinstance(metadata, _Row), name
    return FilterField(name, metadata.test, metadata.help, metadata.payload, metadata.group,
                       metadata.option or "--" + name.replace("_", "-"))  # fmt: skip


FILTERS: tuple[FilterField, ...] = tuple(_spec(f.name, f.metadata[_ROW]) for f in fields(Filters))


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
                raise _bad(name, f"{value!r} is not an ISO date or datetime (e.g. 2024-03-01 "
                                 "or 2024-03-01T14:30)") from None  # fmt: skip
    if day is not None:
        if end:
            return datetime.combine(day + timedelta(days=1), time(), UTC), True
        return datetime.combine(day, time(), UTC), False
    assert moment is not None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)), False


_DURATION = re.compile(r"(?:(\d+)\s*h)?\s*(?:(\d+)\s*m(?:in)?)?\s*(?:(\d+)\s*s)?", re.I)


def seconds(name: str, value: int | str | None) -> int | None:
    """A duration as whole seconds: 600, "600", "10m", "1h30m", "90s"; FilterError naming
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
        raise _bad(name, f"{value!r} is not a duration (seconds, or e.g. 10m, 1h30m)")
    return found
