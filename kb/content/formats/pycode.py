"""Python -> the module preamble (docstring, imports, constants) and one chunk per top-level
function or class (a class too long for one chunk: its header, then one chunk per method),
located by lines (`L a-b`). A file that does not parse is cut into line windows instead, and
the summary says why."""

from __future__ import annotations

import ast

from kb.content.formats.base import Block, Parsed, decode_text, line_blocks

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _first_line(node: ast.stmt) -> int:
    """0-based first line, decorators included."""
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)]) - 1


def read(data: bytes, chunk_chars: int) -> Parsed:
    text = decode_text(data)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        where = f" at line {line}" if line else ""
        notice = f"Python syntax error{where}: indexed as line windows"
        return Parsed(text, "code", notice=notice)
    starts: list[tuple[int, str, tuple[str, ...]]] = []
    previous_def = False
    lines = text.split("\n")
    for node in tree.body:
        if isinstance(node, _DEFS):
            starts.append((_first_line(node), "", (node.name,)))
            size = sum(len(line) + 1 for line in lines[_first_line(node) : node.end_lineno])
            if isinstance(node, ast.ClassDef) and size > chunk_chars:
                starts += [
                    (_first_line(m), "", (node.name, m.name)) for m in node.body
                    if isinstance(m, _DEFS)
                ]  # fmt: skip
            previous_def = True
        elif previous_def:  # code after a definition: a preamble-like span of its own
            starts.append((node.lineno - 1, "", ()))
            previous_def = False
    blocks = [Block(b.start, b.end, b.locator, b.heading_path, code=True)
              for b in line_blocks(text, starts)]  # fmt: skip
    return Parsed(text, "code", blocks)
