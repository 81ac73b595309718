"""What README and docs/guide/tools.md show matches what the code does: the tools' arguments and
results (docs/guide/tools.md is generated from the tools' snapshot), README's tool list and filter
table
(built from kb.search.filters), the sample output of query.py, and figures quoted in more than one
place."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from helpers import REPO_ROOT, script_module
from ingest_fixtures import KIMCHI, write
from mcp_fixtures import SNAPSHOT
from stack_files import embedder_settings_class
from tools_reference import (
    TOOLS_MD,
    filters_block,
    render_extras,
    render_filters,
    render_tools,
    result_schemas,
    surface_extras,
    write_if_asked,
)

from kb.content.chunking import chunk_note
from kb.content.notes import read_note
from kb.core.schema import Hit

README = REPO_ROOT / "README.md"
ALL_TOOLS = SNAPSHOT.with_name("tools_list_write_tools.json")  # every tool, the write ones too
ARGUMENTS_HEADER = "| Argument | Default | Meaning |"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1"


def readme() -> str:
    return README.read_text(encoding="utf-8")


def tools_md_section(name: str) -> str:
    """docs/guide/tools.md's section of one tool."""
    text = TOOLS_MD.read_text(encoding="utf-8")
    start = text.index(f"\n## {name}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def tool(name: str) -> dict[str, Any]:
    """A tool as tools/list shows it (the snapshot test_mcp_server.py pins to the live server)."""
    [found] = [t for t in json.loads(SNAPSHOT.read_text()) if t["name"] == name]
    return found


def table_after(header: str, text: str | None = None) -> list[list[str]]:
    """The cells of each row of the table that starts with `header` (in README by default)."""
    text = readme() if text is None else text
    assert header in text, f"no table headed {header!r}"
    rows = []
    for line in text[text.index(header) :].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_the_tools_reference_lists_every_search_notes_argument_with_its_default() -> None:
    schema = tool("search_notes")["inputSchema"]
    documented = {}
    for name, default, _meaning in table_after(ARGUMENTS_HEADER, tools_md_section("search_notes")):
        [argument] = re.findall(r"`(\w+)`", name)
        documented[argument] = default
    assert set(documented) == set(schema["properties"]), "README's argument table vs the tool"
    for argument, default in documented.items():
        if argument in schema.get("required", []):
            assert default == "(required)", argument
        else:
            literal = re.fullmatch(r"`(.*)`", default)
            assert literal, f"{argument}: default {default!r} is not a `json literal`"
            expected = schema["properties"][argument].get("default")  # none given: null
            assert json.loads(literal[1]) == expected, argument


def test_the_tools_reference_names_every_field_of_a_search_notes_result() -> None:
    note = result_schemas()["search_notes"]["$defs"]["Hit"]["properties"]
    section = tools_md_section("search_notes")
    returns = table_after("| Field | Type | Meaning |", section[section.index("Each `Hit`") :])
    assert set(note) <= {re.fullmatch(r"`(\w+)`", row[0])[1] for row in returns}


def test_the_tools_reference_is_generated_from_the_tools_snapshot() -> None:
    expected = (
        render_tools(json.loads(ALL_TOOLS.read_text()), result_schemas())
        + "\n"
        + render_extras(*surface_extras())
    )
    write_if_asked(TOOLS_MD, expected, UPDATE)
    assert TOOLS_MD.read_text(encoding="utf-8") == expected, (
        "docs/guide/tools.md is not what the tools' snapshot says; after a deliberate change "
        "rewrite it with UPDATE_SNAPSHOTS=1 pytest tests/project/test_readme.py"
    )


def test_readme_lists_every_tool_in_one_line_and_links_the_reference() -> None:
    names = {t["name"] for t in json.loads(ALL_TOOLS.read_text())}
    rows = table_after("| Tool | What it does |")
    listed = {name for row in rows for name in re.findall(r"`(\w+)`", row[0])}
    assert listed == names, "README's tool table vs tools/list"
    assert "(docs/guide/tools.md)" in readme()


def test_readme_filter_table_is_built_from_the_filters_table() -> None:
    if UPDATE:
        README.write_text(readme().replace(filters_block(readme()), render_filters()))
    assert filters_block(readme()) == render_filters(), (
        "README's filter table is not kb/search/filters.py's; rewrite it with "
        "UPDATE_SNAPSHOTS=1 pytest tests/project/test_readme.py"
    )


def test_readme_sample_query_output_is_what_query_py_prints_for_that_note(tmp_path: Path) -> None:
    # README's sample is the kimchi note of the tests (and of ingest_check.py), at 6-9
    block = re.search(r"```\n(1\. 0\.\d{3}  recipes/kimchi\.md.*?)\n```", readme(), re.S)
    assert block, "README lost its sample query.py output"
    sample = block[1].splitlines()
    path = write(tmp_path / "recipes" / "kimchi.md", KIMCHI)
    note = read_note(path, "recipes/kimchi.md", max_bytes=1_000_000)
    chunk = chunk_note(note)[0]
    hit = Hit(
        text=chunk.text,
        source=note.source,
        score=float(sample[0].split()[1]),
        tags=list(note.tags),
        line_start=chunk.line_start,
        line_end=chunk.line_end,
        heading_path=list(chunk.heading_path),
    )
    printed = script_module("query.py").format_hit(1, hit).splitlines()
    assert sample[0] == printed[0]
    assert printed[1].startswith(sample[1].rstrip("…"))  # README shortens the passage


def test_readme_quotes_one_int8_cosine_figure_and_so_does_the_setting() -> None:
    description = embedder_settings_class().model_fields["EMBED_DTYPE"].description
    docs = [readme(), *(p.read_text(encoding="utf-8") for p in (REPO_ROOT / "docs").rglob("*.md"))]
    figures = [
        f
        for text in docs
        for f in re.findall(r"int8[^|]*?cosine to fp32\s+(?:only\s+)?~(0\.\d+)", text)
    ]
    figures += re.findall(r"int8[^|]*?cosine to fp32\s+~(0\.\d+)", description)
    assert len(figures) >= 3, figures  # configuration, docs, the setting
    assert len(set(figures)) == 1, f"int8 cosine to fp32 quoted as {sorted(set(figures))}"
