"""query.py's options: the parser built in steps (the search parameters of kb.search.PARAMETERS,
reading a note, the filters of kb.search.filters) and the checks that turn them into a
SearchRequest."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

from kb.search import PARAMETERS, SearchRequest
from kb.search.filters import FILTERS, KINDS, FilterError, FilterField, Filters
from kb.search.query import MAX_K
from kb.search.related import MAX_K as MAX_RELATED

OPTION = {f.name: f.option for f in FILTERS}  # a filter's name -> the option errors name
GROUPS = {
    "notes": "filters",
    "videos": "saved videos' filters (YOUTUBE_PLAYLISTS)",
    "web": "web pages' filters (BOOKMARKS)",
    "mail": "messages' filters (MAIL)",
}
METAVARS = {"tags": "TAGS", "date": "DATE", "duration": "LENGTH", "text": None, "kind": None}


def _listed(values: list[str]) -> list[str]:
    return [item for value in values for item in value.split(",")]


def add_filters(parser: argparse.ArgumentParser) -> None:
    """One option per filter of kb.search.filters, in its group."""
    groups = {name: parser.add_argument_group(title) for name, title in GROUPS.items()}
    for spec in FILTERS:
        add = groups[spec.group].add_argument
        if spec.value == "tags":
            add(*spec.options, dest=spec.name, action="append", default=[], metavar="TAGS",
                help=f"{spec.help} Comma-separated; may repeat.")  # fmt: skip
        elif spec.value == "kind":
            add(*spec.options, dest=spec.name, choices=KINDS, help=spec.help)
        else:
            add(*spec.options, dest=spec.name, metavar=METAVARS[spec.value], help=spec.help)


def filters_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Filters:
    """The options' Filters; a bad value exits 2 naming the option as it is spelled."""

    def value(spec: FilterField) -> Any:  # each filter's own type (kb.search.filters.Filters)
        given = getattr(args, spec.name)
        return _listed(given) if spec.value == "tags" else given

    try:
        return Filters(**{spec.name: value(spec) for spec in FILTERS})
    except FilterError as exc:
        parser.error(exc.spelled(OPTION.__getitem__))


def build_parser() -> argparse.ArgumentParser:
    """query.py's options, in the order --help lists them."""
    parser = argparse.ArgumentParser(description="Search your ingested notes.")
    add_search_options(parser)
    add_reading_options(parser)
    add_explaining_options(parser)
    add_filters(parser)
    return parser


def add_search_options(parser: argparse.ArgumentParser) -> None:
    """The query, how it is searched (one option per search parameter of kb.search.PARAMETERS)
    and --answer."""
    parser.add_argument("query", nargs="?", default="", help="what to look for, in your own words")
    for spec in PARAMETERS:
        add, help = parser.add_argument, spec.described(MAX_K)
        if spec.shape in ("count", "limit", "chars"):
            add(spec.option, dest=spec.name, type=int, default=spec.default, metavar="N",
                help=help)  # fmt: skip
        elif spec.shape == "choice":
            add(spec.option, dest=spec.name, choices=spec.choices, default=spec.default,
                help=help)  # fmt: skip
        elif spec.shape == "texts":
            add(spec.option, dest=spec.name, action="append", default=[], metavar="TEXT",
                help=f"{help} May repeat.")  # fmt: skip
        elif spec.shape == "switch":
            add(spec.option, dest=spec.name, action="store_true", help=help)
        else:  # a toggle: its default decides at search time; here it can be turned off
            add(spec.option, dest=spec.name, action="store_const", const=False, default=None,
                help=f"{help} {spec.option}: false.")  # fmt: skip
    parser.add_argument(
        "--answer",
        action="store_true",
        help="write a short answer citing [source:lines] from the best passages, with the "
        "model at LLM_URL",
    )


def add_reading_options(parser: argparse.ArgumentParser) -> None:
    """--show and --related: read a note instead of searching."""
    parser.add_argument(
        "--show",
        metavar="SOURCE[:LINE]",
        help="print an indexed note's lines from LINE (default 1) instead of searching",
    )
    parser.add_argument(
        "--related",
        metavar="SOURCE",
        help="list the notes linking to SOURCE, those it links to and the nearest unlinked ones "
        "(-k of them, 0-20) instead of searching",
    )


def add_explaining_options(parser: argparse.ArgumentParser) -> None:
    """--why and --json."""
    parser.add_argument(
        "--why",
        metavar="NOTE",
        help="say why NOTE is not found (indexed, deleted, waiting, failed, skipped by a gate, "
        "never seen); with a query, its rank in each mode and the filters that leave it out",
    )
    parser.add_argument("--json", action="store_true", help='print {"results": [...]} as JSON')


def _spelled(message: str) -> str:
    """A SearchRequest's error naming its fields as query.py's options."""
    for spec in PARAMETERS:
        message = re.sub(rf"^{spec.name}\b", spec.option, message)
    return message


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, SearchRequest | None]:
    """The options, checked: a SearchRequest, or None when a note is read (--show, --related,
    --why); a bad option exits 2."""
    parser = build_parser()
    return checked(parser, parser.parse_args(argv))


def checked(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[argparse.Namespace, SearchRequest | None]:
    if args.show is not None or args.related is not None:
        if args.query:
            parser.error(f"--{'show' if args.show else 'related'} reads a note: give no query")
        if args.show is not None and args.related is not None:
            parser.error("--show and --related: give one of them")
        if args.related is not None and not 0 <= args.k <= MAX_RELATED:
            parser.error(f"-k must be between 0 and {MAX_RELATED} with --related")
        return args, None
    if args.why is not None:
        args.filters = filters_of(parser, args)
        return args, None
    if not args.query.strip():
        parser.error("the query is empty")
    values = {spec.name: getattr(args, spec.name) for spec in PARAMETERS}
    values["per_note"] = values["per_note"] or None  # 0: no limit
    try:
        request = SearchRequest(args.query, filters=filters_of(parser, args), **values)
    except ValueError as exc:
        parser.error(_spelled(str(exc)))
    return args, request
