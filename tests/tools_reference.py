"""The tables the docs are built from: docs/guide/tools.md from the tools' snapshot (what
`tools/list`
answers, pinned by tests/unit/mcp/test_mcp_server.py and test_mcp_write_tools.py), the tools' result
models (notes_server.surface: not sent, results are JSON text) and what the server answers to
resources/templates/list and prompts/list (asked in-process), README's filter table
from kb.search.filters. tests/project/test_readme.py compares them with the files;
`UPDATE_SNAPSHOTS=1 pytest tests/project/test_readme.py` rewrites them."""

from __future__ import annotations

import inspect
import json
import tempfile
from pathlib import Path
from typing import Any

import anyio
from helpers import REPO_ROOT, build_settings
from mcp import Client
from pydantic import TypeAdapter

from kb.app.backend import Backend
from kb.search.filters import FILTERS
from kb.search.hits import RESULT_FIELDS
from notes_server.app import build_server
from notes_server.resources import LISTED
from notes_server.tools import all_tools
from notes_server.tools.common import compact

TOOLS_MD = REPO_ROOT / "docs" / "guide" / "tools.md"
FILTERS_BEGIN = "<!-- filters: built from kb/search/filters.py (tests/project/test_readme.py) -->"
FILTERS_END = "<!-- /filters -->"
METAVARS = {"tags": " a,b", "date": " DATE", "duration": " 10m", "kind": " video"}
EXAMPLES = {
    "path": " recipes/",
    "channel": " NAME",
    "language": " en",
    "category": " Chess",
    "folder": ' "read later"',
    "sender": " ana@example.com",
    "recipient": " ana@example.com",
}

TOOLS_HEADER = """# The MCP tools, resources and prompts

What an assistant sees of the server (`tools/list`), generated from
`tests/snapshots/tools_list_write_tools.json` by `tests/project/test_readme.py` (the
[resources](#resources) and [prompts](#prompts) at the end from the server itself): after changing
a tool, `UPDATE_SNAPSHOTS=1 pytest tests/unit/mcp/test_mcp_server.py
tests/unit/mcp/test_mcp_write_tools.py tests/project/test_readme.py` rewrites the snapshots and
this page. Each description is the prompt the model reads.
`search_notes`, `browse_notes` and `answer_question` take the same filters, built
from one table (`kb/search/filters.py`); only `search_notes` describes them, once. Each result
comes back as compact JSON in one text block, a field left out when it is null or empty
([the design](../design/tool-surface.md)); its fields below are the result models'. Claude Code
and Claude Desktop both give the model that text; Claude Code warns about a result over 10,000
tokens and keeps one over 50,000 characters in a file, which a search (at most 40,000 at k=20)
never reaches ([the clients](../design/tool-surface.md#what-the-clients-pass-to-the-model)).
"""


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:  # a null is never sent (the field is left out)
        return " or ".join(_type(arm) for arm in schema["anyOf"] if arm != {"type": "null"})
    if "enum" in schema:
        return " / ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    if schema.get("type") == "array":
        return f"list of {_type(schema.get('items', {}))}"
    return str(schema.get("type", "any"))


def _ordered(schema: dict[str, Any], table: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Properties in reading order (the snapshot sorts its keys): required first, then those
    not in `table` by name, then `table`'s in its order."""
    required = schema.get("required", [])

    def key(name: str) -> tuple[bool, int, str]:
        return name not in required, table.index(name) if name in table else -1, name

    return [(name, schema["properties"][name]) for name in sorted(schema["properties"], key=key)]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _arguments(tool: dict[str, Any]) -> list[str]:
    schema = tool["inputSchema"]
    if not schema.get("properties"):
        return ["No arguments."]
    rows = ["| Argument | Default | Meaning |", "|---|---|---|"]
    for name, prop in _ordered(schema, [spec.name for spec in FILTERS]):
        required = name in schema.get("required", [])
        default = "(required)" if required else f"`{json.dumps(prop.get('default'))}`"
        meaning = prop.get("description") or "As in `search_notes`."
        rows.append(f"| `{name}` | {default} | {_cell(meaning)} ({_type(prop)}) |")
    return rows


def _fields(schema: dict[str, Any]) -> list[str]:
    rows = ["| Field | Type | Meaning |", "|---|---|---|"]
    for name, prop in _ordered(schema, list(RESULT_FIELDS)):
        rows.append(f"| `{name}` | {_type(prop)} | {_cell(prop.get('description', ''))} |")
    return rows


def result_schemas() -> dict[str, dict[str, Any]]:
    """Each tool's result schema (every tool, the write ones too), from its return annotation."""
    backend = Backend(build_settings(MCP_WRITE_TOOLS=True))
    try:
        tools = all_tools(backend)
    finally:
        backend.close()
    return {
        tool.name: compact(
            TypeAdapter(inspect.signature(tool.fn, eval_str=True).return_annotation).json_schema()
        )
        for tool in tools
    }


def _returns(schema: dict[str, Any]) -> list[str]:
    lines = ["Returns:", "", *_fields(schema)]
    for name, definition in schema.get("$defs", {}).items():
        about = f": {definition['description']}" if definition.get("description") else ""
        lines += ["", f"Each `{name}`{about}", "", *_fields(definition)]
    return lines


def render_tools(tools: list[dict[str, Any]], results: dict[str, dict[str, Any]]) -> str:
    """docs/guide/tools.md for the tools as tools/list gives them (search_notes first), with
    their `results` schemas."""
    ordered = sorted(tools, key=lambda t: (t["name"] != "search_notes", t["name"]))
    lines = [TOOLS_HEADER]
    for tool in ordered:
        hints = tool.get("annotations", {})
        kind = (
            "Read-only."
            if hints.get("readOnlyHint")
            else "Changes the index; only with `MCP_WRITE_TOOLS=true`."
        )
        quoted = [f"> {line}" if line else ">" for line in tool["description"].splitlines()]
        lines += [f"## {tool['name']}", "", kind, "", *quoted, "", *_arguments(tool), ""]
        lines += [*_returns(results[tool["name"]]), ""]
    return "\n".join(lines).rstrip() + "\n"


RESOURCES = f"""## Resources

Every indexed note, document, code file, saved video or page is also an MCP resource, read as
`read_note` reads it (the same gates, private notes refused, credentials redacted, invisible
characters removed, at most 2,000 lines and 500 KB per read; a bracketed last line says where
the rest is). Each search result's `uri` names its passage. `resources/list` names the {LISTED}
items ingested last, newest first, rather than the whole index: a client fetches the whole list
when it connects, and the template reaches every other note.

In Claude Code ([Connect Claude Code to tools via MCP](https://code.claude.com/docs/en/mcp),
"Use MCP resources"), type `@` to pick a listed note from the menu, where resources appear
beside files, or reference one as `@notes:` followed by its URI, e.g.
`@notes:notes:///recipes/bread.md?lines=10-20`; a referenced resource is fetched and attached to
the message, and Claude Code gives the model tools to list and read resources by URI. Claude
Desktop lets you attach a listed note to a message; by reports (Anthropic documents neither) it
offers no template and its model does not read resources by itself, so there any other note
is reached through `search_notes` and `read_note`.
"""

PROMPTS = """## Prompts

Claude Code shows each prompt as a command, `/mcp__notes__<name>` ([its
documentation](https://code.claude.com/docs/en/mcp), "Use MCP prompts as commands"), its
arguments after the name in the order below. Claude Code splits them on spaces (a quoted phrase
too, as its issue tracker reports), so give each argument as one word
(`/mcp__notes__saved_about sourdough 2024-01-01`), or run `/mcp__notes__ask` alone and ask the
question in the next message. A missing, unknown or malformed argument is refused in one line
naming it and the usage. Each prompt asks the assistant to use the tools above and cite what
they return; it reads nothing itself. Claude Desktop lists the prompts in the `+` menu under
the server's connector (a third party's report).
"""


def surface_extras() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """resources/templates/list and prompts/list as the server answers them (in-process, with
    no store: neither list reads one)."""

    async def ask(client: Client) -> tuple[Any, Any]:
        return await client.list_resource_templates(), await client.list_prompts()

    async def run(backend: Backend) -> tuple[Any, Any]:
        async with Client(build_server(backend)) as client:
            return await ask(client)

    with tempfile.TemporaryDirectory() as root:
        backend = Backend(build_settings(root=Path(root)))
        try:
            templates, prompts = anyio.run(run, backend)
        finally:
            backend.close()
    dump = {"mode": "json", "by_alias": True, "exclude_none": True}
    return (
        [t.model_dump(**dump) for t in templates.resource_templates],
        [p.model_dump(**dump) for p in prompts.prompts],
    )


def render_extras(templates: list[dict[str, Any]], prompts: list[dict[str, Any]]) -> str:
    """docs/guide/tools.md's sections on the resources and the prompts."""
    lines = [RESOURCES, "| URI template | MIME type | What it is |", "|---|---|---|"]
    lines += [
        f"| `{t['uriTemplate']}` | {t['mimeType']} | {_cell(t['description'])} |" for t in templates
    ]
    lines += ["", PROMPTS, "| Prompt | Arguments | What it asks |", "|---|---|---|"]
    for prompt in prompts:
        arguments = "<br>".join(
            f"`{a['name']}`{' (required)' if a.get('required') else ''}: {_cell(a['description'])}"
            for a in prompt.get("arguments", [])
        )
        lines.append(
            f"| `{prompt['name']}` | {arguments or 'none'} | {_cell(prompt['description'])} |"
        )
    return "\n".join(lines) + "\n"


def render_filters() -> str:
    """README's table of query.py's filter options beside the tools' arguments."""
    rows = [
        FILTERS_BEGIN,
        "| `query.py` option | tool argument | keeps |",
        "|---|---|---|",
        *(
            f"| `{spec.option}{EXAMPLES.get(spec.name) or METAVARS[spec.value]}` | `{spec.name}` "
            f"| {_cell(spec.help)} |"
            for spec in FILTERS
        ),
        FILTERS_END,
    ]
    return "\n".join(rows)


def filters_block(readme: str) -> str:
    """The generated filter table as README has it."""
    assert FILTERS_BEGIN in readme and FILTERS_END in readme, "README lost its filter table"
    start = readme.index(FILTERS_BEGIN)
    return readme[start : readme.index(FILTERS_END, start) + len(FILTERS_END)]


def write_if_asked(path: Path, text: str, update: bool) -> None:
    if update:
        path.write_text(text, encoding="utf-8")
