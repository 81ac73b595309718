"""Jupyter `.ipynb` -> one chunk per cell (`cell N [code|markdown]`), sources only: outputs
are dropped (they are often large, binary or stale). Read with the json module."""

from __future__ import annotations

from kb.content.formats.base import FormatError, Parsed, TextBuilder, json_with_list


def read(data: bytes) -> Parsed:
    _, cells = json_with_list(data, "notebook", "cells")
    out = TextBuilder()
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict):
            continue
        kind = str(cell.get("cell_type", "code"))
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if not source.strip():
            continue
        out.add(f"[cell {number} {kind}]\n")
        out.block(source.strip("\n"), f"cell {number} [{kind}]", code=kind == "code")
        out.add("\n\n")
    if not out.blocks:
        raise FormatError("a notebook with no cell text")
    return Parsed(out.text, "notebook", out.blocks)
