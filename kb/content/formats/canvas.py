"""Obsidian canvases (`.canvas`, the open JSON Canvas format) -> one chunk per text node, located
by its node id inside the groups that hold it (`Billing ledger > node n1`), one for the file and
link nodes (`cards`) and one for the connections between nodes (`connections`).

The readable text (what `read_note` shows) holds each text node's Markdown under a `[node ID]`
line, in the file's order, then the cards (paths and addresses), then the edges (`Commands ->
append -> ADR-007 ...`). The file nodes are the canvas's links to other notes (`Parsed.links`);
the text nodes' own wikilinks and tags are read by kb.content.notes like a note's body. A group
holds a node when the node lies inside the group's rectangle.
"""

from __future__ import annotations

from typing import Any

from kb.content.formats.base import FormatError, Parsed, TextBuilder, json_with_list

PATH_SEPARATOR = " > "
Box = tuple[float, float, float, float]  # left, top, right, bottom


def _box(node: dict[str, Any]) -> Box | None:
    try:
        x, y = float(node["x"]), float(node["y"])
        return x, y, x + float(node["width"]), y + float(node["height"])
    except (KeyError, TypeError, ValueError):
        return None


def _inside(inner: Box | None, outer: Box | None) -> bool:
    if inner is None or outer is None:
        return False
    left, top, right, bottom = outer
    return left <= inner[0] and top <= inner[1] and inner[2] <= right and inner[3] <= bottom


def _area(box: Box | None) -> float:
    return (box[2] - box[0]) * (box[3] - box[1]) if box else 0.0


def _name(node: dict[str, Any]) -> str:
    """How a connection names a node: a text node's first line, a file's name, a link, a label."""
    kind = node.get("type")
    if kind == "text":
        first = next((ln for ln in str(node.get("text", "")).splitlines() if ln.strip()), "")
        return first.strip().lstrip("#").strip().strip("*").strip() or f"node {node.get('id')}"
    if kind == "file":
        name = str(node.get("file", "")).rsplit("/", 1)[-1]
        return name.removesuffix(".md")
    if kind == "link":
        return str(node.get("url", ""))
    return str(node.get("label") or f"node {node.get('id')}")


def read(data: bytes) -> Parsed:
    board, nodes = json_with_list(data, "canvas", "nodes")
    nodes = [n for n in nodes if isinstance(n, dict) and isinstance(n.get("id"), str)]
    groups = [
        (n, _box(n)) for n in nodes if n.get("type") == "group" and str(n.get("label", "")).strip()
    ]
    # outer groups first: a group's area is larger than that of any group inside it
    groups.sort(key=lambda g: -_area(g[1]))
    out = TextBuilder()
    links: list[str] = []
    cards: list[str] = []  # file and link nodes: one block, after the text nodes
    for node in nodes:
        kind, box = node.get("type"), _box(node)
        path = tuple(
            str(g["label"]).strip() for g, gbox in groups if g is not node and _inside(box, gbox)
        )
        where = PATH_SEPARATOR.join((*path, f"node {node['id']}"))
        if kind == "text" and str(node.get("text", "")).strip():
            out.add(f"[{where}]\n")
            out.block(str(node["text"]).strip("\n"), where, path)
            out.add("\n\n")
        elif kind == "file" and str(node.get("file", "")).strip():
            links.append(str(node["file"]).strip())
            cards.append(f"{where}: file {str(node['file']).strip()}")
        elif kind == "link" and str(node.get("url", "")).strip():
            cards.append(f"{where}: link {str(node['url']).strip()}")
    if cards:
        out.add("[cards]\n")
        out.block("\n".join(cards), "cards")
        out.add("\n\n")
    by_id = {n["id"]: n for n in nodes}
    edges = [e for e in board.get("edges") or [] if isinstance(e, dict)]
    lines = []
    for edge in edges:
        start, end = by_id.get(edge.get("fromNode")), by_id.get(edge.get("toNode"))
        if start is None or end is None:
            continue
        label = str(edge.get("label") or "").strip()
        lines.append(" -> ".join(p for p in (_name(start), label, _name(end)) if p))
    if lines:
        out.add("[connections]\n")
        out.block("\n".join(lines), "connections")
        out.add("\n")
    if not out.blocks:
        raise FormatError("a canvas with no text, file or link nodes")
    return Parsed(out.text, "canvas", out.blocks, links=links)
