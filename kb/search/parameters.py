"""The search parameters, written once: each is one field of kb.search.SearchRequest, declared
with `param(...)` (as the filters are rows of kb.search.filters).

A row names the parameter once: that name is the SearchRequest field and the MCP tools'
argument (search_notes, answer_question's `k`); `option` is query.py's spelling of it. Its
`shape` says how an interface takes a value (a number, one of the field's choices, a switch, a
list, a reranker left on or turned off), `help` is its one line for the tools' schemas, query.py's
`--help` and so the docs (docs/guide/tools.md is built from the schemas), with `{most}` standing
for the interface's largest k (the tools return fewer passages than query.py). `PARAMETERS`
(kb.search.entry) lists the rows; the tools' parameter types (notes_server.surface), query.py's
options (kb.app.query_options) and the arguments query.py sends the MCP server (kb.app.remote)
are built from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeVar, get_args

# How a value is taken: `count` a number, `limit` a number where 0 (None in a SearchRequest)
# means none, `choice` one of the field's Literal values, `texts` a list (query.py: the option
# repeated), `switch` off unless given, `toggle` on, off or None (the default: decided at search
# time; query.py can only turn it off), `chars` a number or None.
Shape = Literal["count", "limit", "choice", "texts", "switch", "toggle", "chars"]
_ROW = "parameter"  # the key of a row in its dataclass field's metadata
T = TypeVar("T")


@dataclass(frozen=True)
class _Row:
    shape: Shape
    help: str
    option: str


def param(default: T, shape: Shape, *, help: str, option: str = "") -> T:
    """One search parameter: a SearchRequest field with its shape, its help line and query.py's
    spelling of it when that is not `--name-with-dashes`."""
    return field(default=default, metadata={_ROW: _Row(shape, help, option)})


@dataclass(frozen=True)
class Parameter:
    """A search parameter as the interfaces built from the table see it."""

    name: str  # the SearchRequest field and the MCP argument
    shape: Shape
    help: str  # one line; `{most}`: the interface's largest k
    option: str  # query.py's option
    default: Any
    choices: tuple[str, ...]  # a `choice`'s values

    def described(self, most: int) -> str:
        """The help line for an interface whose largest k is `most`."""
        return self.help.format(most=most)

    def argument(self, value: Any) -> Any:
        """A SearchRequest's value as the MCP tools take it."""
        if self.shape == "limit":
            return value or 0  # the tools' "no limit"
        return list(value) if self.shape == "texts" else value


def table(cls: type, types: dict[str, Any]) -> tuple[Parameter, ...]:
    """The rows of dataclass `cls` (its fields declared with `param`); `types`: its fields'
    resolved types (typing.get_type_hints), whose Literal values are a `choice`'s."""
    rows = []
    for f in fields(cls):
        row = f.metadata.get(_ROW)
        if row is None:
            continue
        assert isinstance(row, _Row), f.name
        choices = get_args(types[f.name]) if row.shape == "choice" else ()
        rows.append(Parameter(f.name, row.shape, row.help,
                              row.option or "--" + f.name.replace("_", "-"), f.default,
                              tuple(str(c) for c in choices)))  # fmt: skip
    return tuple(rows)
