"""The documentation holds together: every relative link of every Markdown file (README,
CONTRIBUTING, docs/, bench/) names a file that exists and, with `#anchor`, a heading in it;
docs/README.md indexes every guide and design note; no screenshot shows a machine path."""

from __future__ import annotations

import re
import struct
import zlib
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
from helpers import REPO_ROOT
from screenshots import MACHINE_PATHS, TEXT_KEY

DOCS = REPO_ROOT / "docs"
INDEX = DOCS / "README.md"
IMAGES = DOCS / "img"
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def markdown_files() -> list[Path]:
    roots = [REPO_ROOT / "README.md", REPO_ROOT / "CONTRIBUTING.md"]
    found = [p for p in roots if p.is_file()]
    found += sorted(DOCS.rglob("*.md"))
    found += sorted((REPO_ROOT / "bench").glob("**/README.md"))
    return found


def prose(text: str) -> str:
    """Markdown without its fenced blocks and inline code (neither holds links)."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercased, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"[^\w\- ]", "", text.replace("`", "").strip().lower())
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    seen: Counter[str] = Counter()
    out = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6}\s+(.+?)\s*#*\s*$", line)
        if match:
            base = slug(match[1])
            out.add(f"{base}-{seen[base]}" if seen[base] else base)
            seen[base] += 1
    return frozenset(out)


def broken_links(path: Path) -> list[str]:
    broken = []
    for match in LINK.finditer(prose(path.read_text(encoding="utf-8"))):
        target = match[1] or match[2]
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(REPO_ROOT)}")
    return broken


@pytest.mark.parametrize(
    "path", markdown_files(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix()
)
def test_every_relative_link_names_an_existing_file_and_heading(path: Path) -> None:
    assert broken_links(path) == []


def test_the_docs_index_links_every_guide_and_every_design_note() -> None:
    index = INDEX.read_text(encoding="utf-8")
    linked = {(DOCS / m).resolve() for m in re.findall(r"\]\(((?:guide|design)/[^)#\s]+)", index)}
    written = {p.resolve() for p in (DOCS / "guide").glob("*.md")}
    written |= {p.resolve() for p in (DOCS / "design").glob("*.md")}
    assert sorted(str(p) for p in written - linked) == []


ARCHITECTURE = DOCS / "design" / "architecture.md"
PACKAGES = ("kb", "mcp/notes_server", "embedder/embed_server")


def test_the_architecture_page_lists_every_module_and_only_modules_that_exist() -> None:
    named = set(re.findall(r"`((?:kb|mcp|embedder)/[\w/]+\.py)`", ARCHITECTURE.read_text()))
    modules = {
        p.relative_to(REPO_ROOT).as_posix()
        for package in PACKAGES
        for p in (REPO_ROOT / package).rglob("*.py")
        if p.name != "__init__.py" or p.parent.name == "formats"
    }
    assert sorted(named - modules) == [], "named in docs/design/architecture.md, not in the code"
    assert sorted(modules - named) == [], "modules docs/design/architecture.md does not list"


def png_text(path: Path) -> dict[str, str]:
    """The text chunks of a PNG file (keyword -> text): tEXt, zTXt and uncompressed iTXt."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    chunks, at = {}, 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            chunks[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            chunks[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"iTXt":
            key, _, rest = body.partition(b"\0")
            compressed, text = rest[0], rest[2:].split(b"\0", 2)[2]
            text = zlib.decompress(text) if compressed else text
            chunks[key.decode("latin-1")] = text.decode("utf-8")
        at += 12 + length
    return chunks


@pytest.mark.parametrize("image", sorted(IMAGES.glob("*.png")), ids=lambda p: p.name)
def test_each_screenshot_carries_the_page_text_it_shows_and_no_machine_path(image: Path) -> None:
    """tests/screenshots.py stores each page's text in its PNG (checked there before the
    screenshot is taken); a PNG without it was made some other way."""
    text = png_text(image).get(TEXT_KEY)
    assert text, f"{image.name}: not made by tests/screenshots.py (make screenshots)"
    assert MACHINE_PATHS.findall(text) == [], image.name
