"""What every tool module shares: kb's failures as tool errors, blocking calls off the event
loop, the filters as parameters (one per row of kb.search.filters, the same in every tool that
searches or lists), and `make`, which builds every tool the same way (docs/design/tool-surface.md):

- its result reaches the client once, as compact JSON in one text block, with no field that is
  null or empty (a field that does not apply is absent); no structured content, no output
  schema: every client reads the text, and the schemas cost more context than they gave;
- its input schema is cut to what the model needs: no pydantic titles (the property names
  again), no `"default": null`, no `null` arm of an optional argument (leaving it out is how not
  to use it; the server still accepts null);
- its arguments are checked by name before anything runs: an unknown one is refused with the
  valid names, a wrong value gets one line naming the argument.

The surface is paid for in every assistant session's context: tests/unit/mcp/test_mcp_server.py
holds tools/list to a budget, tests/unit/mcp/test_mcp_budget.py search_notes' results.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, get_args

import anyio
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError
from pydantic_core import to_jsonable_python

from kb.app.backend import embedder_message
from kb.core.errors import EmbedError, IngestError, NoteNotFound, StoreError
from kb.search.filters import FILTERS, KINDS, FilterError, Filters, Value

if TYPE_CHECKING:
    from mcp.server.mcpserver.context import Context

T = TypeVar("T")
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
# a filter's argument type by the shape of its value (kb.search.filters.VALUES)
ARGUMENT_TYPES: dict[Value, object] = {
    "tags": list[str] | None,
    "date": str | None,
    "text": str | None,
    "kind": Literal["note", "video", "web", "email"] | None,
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


def invalid(tool: str, exc: ValueError | str) -> ToolError:
    """A bad argument, in one line the model can correct it from."""
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


class LeanTool(Tool):
    """A tool whose arguments are checked by name first and whose result is compact JSON text."""

    async def run(
        self, arguments: dict[str, Any], context: Context[Any, Any], convert_result: bool = False
    ) -> Any:
        checked(self, arguments)
        result = await super().run(arguments, context, convert_result=False)
        if not convert_result or isinstance(result, InputRequiredResult | CallToolResult):
            return result
        return CallToolResult(content=[TextContent(type="text", text=lean_json(result))])


def make(fn: Callable[..., Any], description: str, annotations: ToolAnnotations) -> Tool:
    """The tool `fn` (named as it is): its input schema compacted, no output schema."""
    tool = LeanTool.from_function(
        fn, description=description, annotations=annotations, structured_output=False
    )
    tool.parameters = compact(tool.parameters)
    return tool


def checked(tool: Tool, arguments: dict[str, Any]) -> None:
    """Refuse what the SDK would ignore or report as a validation dump: an argument the tool
    does not take (with the ones it takes), or values that do not fit (one line, naming each)."""
    fields = tool.fn_metadata.arg_model.model_fields
    names = [field.alias or name for name, field in fields.items()]
    prefix = f"Error executing tool {tool.name}"  # as the SDK words what a tool raises
    if unknown := [name for name in arguments if name not in names]:
        said = ", ".join(f"'{name}'{guess(name, names)}" for name in unknown)
        message = f"no argument {said}; it takes {', '.join(names)}"
        raise ToolError(f"{prefix}: {invalid(tool.name, message)}")
    try:
        tool.fn_metadata.validate_arguments(arguments)
    except ValidationError as exc:  # the cause: the server logs the argument names only
        message = "; ".join(map(wrong, exc.errors()))
        raise ToolError(f"{prefix}: {invalid(tool.name, message)}") from exc


def guess(name: str, names: list[str]) -> str:
    """' (did you mean ...?)' with the closest names (line: lines, start_line), or ''."""
    close = difflib.get_close_matches(name, names, n=2, cutoff=0.5)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def wrong(error: Any) -> str:
    """One pydantic error as 'argument: what is wrong' (without the value, which may be long)."""
    where = error["loc"][0] if error["loc"] else "arguments"
    if error["type"] == "missing":
        return f"argument '{where}' is required"
    return f"argument '{where}': {' '.join(str(error['msg']).split())}"


def lean_json(result: Any) -> str:
    """`result` (a pydantic model of notes_server.surface) as compact JSON: a field that is null,
    or an empty string, list or object below the top level, is left out (a video's fields on a
    note's passage); the top level keeps its empty lists (no results is an answer)."""
    data = to_jsonable_python(result)
    top = {key: lean(value) for key, value in data.items() if value is not None}
    return json.dumps(top, ensure_ascii=False, separators=(",", ":"))


def lean(value: Any) -> Any:
    if isinstance(value, float):  # scores: 6 decimals, as close as anything compares them
        return round(value, 6)
    if isinstance(value, dict):
        return {k: lean(v) for k, v in value.items() if v not in (None, "", [], {})}
    if isinstance(value, list):
        return [lean(item) for item in value]
    return value


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """An input schema without titles and `"default": null`, an optional argument's
    `anyOf [X, null]` as X."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in ("properties", "$defs"):  # names -> schemas (a property may be called title)
            out[key] = {name: compact(inner) for name, inner in value.items()}
        elif key in NOT_SCHEMAS or not isinstance(value, dict | list):
            out[key] = value
        elif isinstance(value, list):
            out[key] = [compact(v) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = compact(value)
    if "default" in out and out["default"] is None:
        del out["default"]
        arms = [arm for arm in out.get("anyOf", []) if arm != {"type": "null"}]
        if len(arms) == 1:
            del out["anyOf"]
            out = {**arms[0], **out}
        elif arms:
            out["anyOf"] = arms
    return out
