"""The limits one hostile item (a file, a page, a bookmark, a frontmatter value) meets while it is
read, so that it fails alone, by name, in bounded time and memory, and never stops the sync of
anything else (docs/guide/security.md lists them with the web's):

- MAX_DEPTH: how deep a JSON or YAML document may nest (a canvas, a notebook, a `.json`, a
  Chromium Bookmarks file, frontmatter); the readers that walk them recurse;
- MAX_ALIASED: how many values a YAML document's aliases may stand for, all told (a ~350-byte
  alias bomb stands for billions, and every walk of it visits each);
- MAX_REASON: how long a failure's reason may be (it goes to the log, the summary, status and
  the dashboard), one line; MAX_NAME the name it fails under; both `escaped` (a file name
  holding an ESC sequence cannot drive the terminal that prints it).

Constants, not settings: no real note comes near them.
"""

from __future__ import annotations

import json
import reprlib
from typing import Any

import yaml

MAX_DEPTH = 100
MAX_ALIASED = 10_000
MAX_REASON = 300
MAX_NAME = 1_000  # a failure's name: a path (4,096 bytes at most) or a bookmark's URL (any length)

_shown = reprlib.Repr()
_shown.maxlevel, _shown.maxstring, _shown.maxother = 2, 60, 60
_shown.maxlist = _shown.maxdict = _shown.maxtuple = _shown.maxset = 4


class TooComplex(ValueError):
    """A document nested deeper than MAX_DEPTH, or whose aliases stand for too much."""


def bounded(reason: str, limit: int = MAX_REASON) -> str:
    """`reason` on one line (`escaped`), cut to `limit` characters."""
    head = reason[: 2 * limit]  # what the first words need, never the whole of a huge one
    line = escaped(" ".join(head.split()))
    if len(line) > limit or len(reason) > len(head):
        line = line[: limit - 1] + "…"
    return line


def escaped(text: str) -> str:
    """`text` for a terminal: control characters written as escapes (`\\x1b`), so a file
    name holding an ESC sequence cannot drive the terminal that prints it."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode()
                   for c in text)  # fmt: skip


def shown(value: object) -> str:
    """A value as a message shows it: its repr, a few levels and items of it at most."""
    return _shown.repr(value)


def json_loads(text: str) -> Any:
    """json.loads, TooComplex past MAX_DEPTH (json.JSONDecodeError for what is not JSON)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooComplex(f"nested deeper than {MAX_DEPTH} levels") from None
    depth, stack = 0, [(value, 1)]
    while stack:  # no recursion: the walk itself must not be what fails
        item, level = stack.pop()
        if isinstance(item, dict | list):
            depth = max(depth, level)
            if depth > MAX_DEPTH:
                raise TooComplex(f"nested deeper than {MAX_DEPTH} levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return value


def check_yaml(text: str) -> None:
    """TooComplex when the YAML in `text` nests deeper than MAX_DEPTH or its aliases stand for
    more than MAX_ALIASED values; read from the parser's events (it keeps no Python stack), so
    before the composer, which recurses, ever sees it. Not YAML: yaml.YAMLError, as loading."""
    anchored: dict[str, tuple[int, int]] = {}  # anchor -> (values it stands for, its height)
    open_: list[tuple[int, str | None]] = []  # per open collection: values seen at its start
    heights: list[int] = []  # per open collection: the tallest child so far
    seen = aliased = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_) >= MAX_DEPTH:
                raise TooComplex(f"nested deeper than {MAX_DEPTH} levels")
            seen += 1
            open_.append((seen, event.anchor))
            heights.append(0)
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            start, anchor = open_.pop()
            size, height = seen - start + 1, heights.pop() + 1
            if anchor:
                anchored[anchor] = (size, height)
        elif isinstance(event, yaml.AliasEvent):
            size, height = anchored.get(event.anchor or "", (1, 0))
            seen += size
            aliased += size
            if aliased > MAX_ALIASED:
                raise TooComplex(f"its aliases stand for more than {MAX_ALIASED:,} values")
        elif isinstance(event, yaml.ScalarEvent):
            seen += 1
            size, height = 1, 0
            if event.anchor:
                anchored[event.anchor] = (1, 0)
        else:
            continue
        if len(open_) + height > MAX_DEPTH:
            raise TooComplex(f"nested deeper than {MAX_DEPTH} levels")
        if heights:
            heights[-1] = max(heights[-1], height)
