"""What every tool module shares: kb's failures as tool errors, blocking calls off the event
loop, the filters as parameters (one per row of kb.search.filters, the same in every tool that
searches or lists), and `make`, which builds a Tool with its schemas cut to what the model needs.

The tools' schemas are paid for in every assistant session's context (tests/test_mcp_server.py
prints their size and bounds it), so `make` drops what tells the model nothing: pydantic's titles
(the property names again), `"default": null`, and in input schemas the `null` arm of an optional
argument (leaving it out is how not to use it; the server still accepts null). Output schemas keep
their `null` arms: clients validate results against them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal, TypeVar, get_args

import anyio
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations
from pydantic import Field

from kb.app.backend import embedder_message
from kb.core.errors import EmbedError, IngestError, NoteNotFound, StoreError
from kb.search.filters import FILTERS, KINDS, FilterError, Filters, Value

T = TypeVar("T")
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
# a filter's argument type by the shape of its value (kb.search.filters.VALUES)
ARGUMENT_TYPES: dict[Value, object] = {
    "tags": list[str] | None,
    "date": str | None,
    "text": str | None,
    "kind": Literal["note", "video"] | None,
    "duration": int | str | None,
}
assert get_args(get_args(ARGUMENT_TYPES["kind"])[0]) == KINDS


def filter_parameters(described: bool) -> list[inspect.Parameter]:
    """One keyword parameter per filter; `described`: with its help line (search_notes' only:
    the other tools say they take the same filters, so each is described once in tools/list)."""
    return [
        inspect.Parameter(
            spec.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                ARGUMENT_TYPES[spec.value], Field(description=spec.help if described else None)
            ],
        )
        for spec in FILTERS
    ]


NOT_SCHEMAS = frozenset({"default", "enum", "const", "examples", "required"})


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn the failures a user can fix into messages the model sees; anything else is a bug
    and reaches the SDK as a crash (logged with its traceback, generic text to the client)."""
    try:
        yield
    except EmbedError as exc:
        raise ToolError(embedder_message(exc)) from exc
    except (StoreError, NoteNotFound, IngestError) as exc:
        raise ToolError(str(exc)) from exc


async def off_loop(fn: Callable[[], T]) -> T:
    """Run a blocking call (sync httpx, qdrant-client) in a worker thread."""
    with tool_errors():
        return await anyio.to_thread.run_sync(fn)


def invalid(tool: str, exc: ValueError) -> ToolError:
    """A bad argument, as the SDK words its own validation errors: the model can correct it."""
    return ToolError(f"validation error for {tool}: {exc}")


def with_filters(
    tool: str, *, described: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`fn(..., where: Filters)` as a function taking every filter as its own keyword argument
    (the tool's parameters; the SDK reads the signature), which it passes on as `where`. A bad
    value is a validation error of `tool` naming the argument."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(fn, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "where"]
        filters = filter_parameters(described)
        names = [spec.name for spec in FILTERS]

        def where(arguments: dict[str, Any]) -> dict[str, Any]:
            values = {name: arguments.pop(name, None) for name in names}
            try:
                return {**arguments, "where": Filters(**values)}
            except FilterError as exc:
                raise invalid(tool, exc) from None

        async def wait(**arguments: Any) -> Any:
            return await fn(**where(arguments))

        def call(**arguments: Any) -> Any:
            return fn(**where(arguments))

        # the SDK runs a sync function (a resolver doing blocking work) in a worker thread
        wrapper: Callable[..., Any] = wait if inspect.iscoroutinefunction(fn) else call
        functools.update_wrapper(wrapper, fn, updated=())
        wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*own, *filters]
        )
        wrapper.__annotations__ = {
            **{p.name: p.annotation for p in [*own, *filters]},
            "return": signature.return_annotation,
        }
        return wrapper

    return wrap


def make(fn: Callable[..., Any], description: str, annotations: ToolAnnotations) -> Tool:
    """The tool `fn` (named as it is), with its input and output schemas compacted."""
    tool = Tool.from_function(fn, description=description, annotations=annotations)
    tool.parameters = compact(tool.parameters, inputs=True)
    metadata = tool.fn_metadata
    if metadata.output_schema is not None:  # read at each tools/list: set before the first
        metadata.output_schema = compact(metadata.output_schema, inputs=False)
    return tool


def compact(schema: dict[str, Any], *, inputs: bool) -> dict[str, Any]:
    """`schema` without titles and `"default": null`; with `inputs`, an optional argument's
    `anyOf [X, null]` becomes X."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in ("properties", "$defs"):  # names -> schemas (a property may be called title)
            out[key] = {name: compact(inner, inputs=inputs) for name, inner in value.items()}
        elif key in NOT_SCHEMAS or not isinstance(value, dict | list):
            out[key] = value
        elif isinstance(value, list):
            out[key] = [compact(v, inputs=inputs) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = compact(value, inputs=inputs)
    if "default" in out and out["default"] is None:
        del out["default"]
        arms = [arm for arm in out.get("anyOf", []) if arm != {"type": "null"}]
        if inputs and len(arms) == 1:
            del out["anyOf"]
            out = {**arms[0], **out}
        elif inputs and arms:
            out["anyOf"] = arms
    return out
