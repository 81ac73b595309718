"""Obsidian's Markdown beyond CommonMark: what a vault's notes say in their body, and how a link
names another note.

`scan(text, start)` reads the body once, line by line, and returns what it found:

- inline tags `#idea`, `#project/alpha/design` (at a line's start or after a space or an
  opening bracket or quote; not all digits), kept as written (kb.content.notes normalises them);
- links: wikilinks `[[Note]]`, `[[Note|shown]]`, `[[Note#Heading]]`, `[[Note#^block]]`, embeds
  `![[Note]]` / `![[image.png]]`, and Markdown links to files `[shown](Folder/Note.md)`;
- edits that turn the body into the text Obsidian shows, for embedding: a wikilink becomes its
  shown text (its alias, else the note's name and heading; a Markdown link stays as written, its
  path words help), `%%comments%%` (inline or a block, never shown by Obsidian) are removed,
  `==highlights==` lose their marks, a callout's `[!type]` marker gives way to its title (or its
  type), a task's `[ ]` / `[x]` box and a line's `^block-id` go.

Nothing is read inside code (fenced blocks, inline code spans) or comments. The stored text stays
the file's, but for its comments (a remark hidden in one is never stored, searched or shown): the
other edits only change what is embedded (kb.content.chunking).

`Vault` resolves a link to an indexed note the way Obsidian does: the path as written (vault-rooted
or relative to the linking note), else the one note whose path ends with it (case-insensitive; if
several, the one beside the linking note, else the shortest path), else a note that has it as an
alias. A link to a file that is not a note (an image, a PDF that is not indexed) is an attachment:
neither a link nor unresolved.

Why not a library: markdown-it-py and mdit-py-plugins know no wikilinks, tags, comments, highlights
or block ids, and their inline tokens carry no offsets, which chunk locators need; the
Obsidian-aware parsers on PyPI need Python 3.12 (obsidianmd-parser) or bring pandas and networkx
and read whole vaults from disk (obsidiantools). This is one pass of regular expressions with a
test per construct (tests/unit/content/test_obsidian.py).
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from urllib.parse import unquote

# a code fence, inside a blockquote or callout too (`> ```css`): its `>` marks come first
_FENCE = re.compile(r"((?: {0,3}>[ \t]?)*) {0,3}(`{3,}|~{3,})(.*)")
_CALLOUT = re.compile(r"[ \t]*(?:>[ \t]?)+\[!([^\]\n]+)\]([+-]?)[ \t]*")
_TASK = re.compile(r"[ \t]*(?:>[ \t]?)*[ \t]*(?:[-*+]|\d+[.)])[ \t]+(\[[^\]\n]\][ \t]+)")
_INLINE = re.compile(
    r"(?P<code>`+)"
    r"|(?P<comment>%%)"
    r"|(?P<wiki>(?P<wbang>!?)\[\[(?P<inner>[^\[\]\n]*)\]\])"
    r"|(?P<md>(?P<mbang>!?)\[(?P<shown>[^\[\]\n]*)\]\((?P<url>[^()\n]*)\))"
    r"|(?P<mark>==(?=[^\s=]))"
    r"|(?P<tag>(?<![^\s(\[{\"'])#(?P<name>[\w/-]+))"
    r"|(?P<block>(?:^|(?<=\s))\^[A-Za-z0-9-]+[ \t]*$)"
)
_HIGHLIGHT_END = re.compile(r"(?<=[^\s=])==")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_SIZE = re.compile(r"\d+(?:x\d+)?")  # `![[image.png|300]]`: a width, not shown text
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,10}$")
NOTE_SUFFIX = ".md"


@dataclass(frozen=True)
class Link:
    target: str  # the file as written, without its heading: "Project Alpha", "Boards/x.canvas"
    heading: str = ""  # what follows `#`: a heading ("Risks") or a block ("^why-audit")
    embed: bool = False  # `![[...]]`: Obsidian shows the target inside the note


@dataclass(frozen=True)
class Edit:
    """Replace text[start:end] by `text` in what is embedded."""

    start: int
    end: int
    text: str = ""
    hidden: bool = False  # a `%%comment%%`: left out of what is stored and shown too


@dataclass(frozen=True)
class Syntax:
    tags: tuple[str, ...] = ()  # inline tags as written, without `#`
    links: tuple[Link, ...] = ()
    edits: tuple[Edit, ...] = ()  # in order, not overlapping


def fence_after(line: str, fence: str | None) -> str | None:
    """The open code fence's marker after `line` (None: outside any code block), after the
    `>` of the blockquotes it opened in: only a fence as deep in quotes closes it."""
    marker = _FENCE.fullmatch(line)
    if marker is None:
        return fence
    quotes, run, rest = marker.groups()
    depth = quotes.count(">")
    if fence is None:  # "```x`" is inline code
        return None if run[0] == "`" and "`" in rest else ">" * depth + run
    opened = fence.lstrip(">")
    closes = (
        depth == len(fence) - len(opened)
        and run[0] == opened[0]
        and len(run) >= len(opened)
        and not rest.strip()
    )
    return None if closes else fence


def shown_name(target: str, heading: str) -> str:
    """How Obsidian shows a link without an alias: `Folder/Note.md#Risks` -> `Note > Risks`."""
    name = target.rstrip("/").rsplit("/", 1)[-1]
    if name.lower().endswith(NOTE_SUFFIX):
        name = name[: -len(NOTE_SUFFIX)]
    parts = [name, *(h for h in heading.split("#") if h and not h.startswith("^"))]
    return " > ".join(p.strip() for p in parts if p.strip())


def _wikilink(inner: str, embed: bool) -> tuple[Link | None, str]:
    """A `[[...]]`'s link (None for one to a heading of the same note) and its shown text."""
    target, bar, alias = inner.partition("|")
    target = target.rstrip("\\").strip()  # `[[Note\|alias]]` inside a table
    path, _, heading = target.partition("#")
    alias = alias.strip()
    if bar and alias and not (embed and _SIZE.fullmatch(alias)):
        shown = alias
    else:
        shown = shown_name(path, heading)
    link = Link(path.strip(), heading.strip(), embed) if path.strip() else None
    return link, shown


def _markdown_link(url: str, embed: bool) -> Link | None:
    """The link of `[shown](url)` when it names a file (not a web address, not `#heading`)."""
    url = url.strip()
    if url.startswith("<"):
        url = url[1:].split(">", 1)[0]
    else:
        url = url.split(maxsplit=1)[0] if url else ""  # a title may follow: (x.md "Title")
    if not url or url.startswith("#") or _SCHEME.match(url):
        return None
    path, _, heading = url.partition("#")
    return Link(unquote(path), unquote(heading), embed) if path else None


def scan(text: str, start: int = 0, end: int | None = None) -> Syntax:
    """Tags, links and embedding edits of the Markdown `text[start:end]` (see the module doc)."""
    end = len(text) if end is None else end
    tags: list[str] = []
    links: list[Link] = []
    edits: list[Edit] = []
    fence: str | None = None
    comment: int | None = None  # where the open `%%` comment started
    offset = start
    for raw in text[start:end].splitlines(keepends=True):
        here = offset
        offset += len(raw)
        line = raw.rstrip("\r\n")
        if comment is None:
            was_open, fence = fence is not None, fence_after(line, fence)
            if was_open or fence is not None:
                continue  # inside a code block, or its opening / closing line
        pos = 0
        if comment is None:
            pos = _line_marks(line, here, edits)
        closers: set[int] = set()
        while pos <= len(line):
            if comment is not None:
                close = line.find("%%", pos)
                if close < 0:
                    break
                edits.append(Edit(comment, here + close + 2, hidden=True))
                comment, pos = None, close + 2
                continue
            found = _INLINE.search(line, pos)
            if found is None:
                break
            at, kind = found.start(), found.lastgroup
            pos = found.end()
            if kind == "code":
                run = found.group("code")
                close_run = re.compile(rf"(?<!`){run}(?!`)").search(line, pos)
                pos = close_run.end() if close_run else pos
            elif kind == "comment":
                comment = here + at
            elif kind == "wiki":
                link, shown = _wikilink(found.group("inner"), bool(found.group("wbang")))
                if link is not None or shown:
                    edits.append(Edit(here + at, here + pos, shown))
                if link is not None:
                    links.append(link)
            elif kind == "md":
                # embedded as written: a documentation site's link paths name what it links to
                # (bench/results/obsidian.md: its shown text alone cost the manual 0.011 nDCG@10)
                link = _markdown_link(found.group("url"), bool(found.group("mbang")))
                if link is not None:
                    links.append(link)
            elif kind == "mark":
                if at in closers:
                    continue  # the closing marks of a highlight met before
                closing = _HIGHLIGHT_END.search(line, pos)
                if closing is None:
                    pos = at + 2
                    continue
                edits.append(Edit(here + at, here + at + 2))
                closers.add(closing.start())
                edits.append(Edit(here + closing.start(), here + closing.end()))
            elif kind == "tag":
                name = found.group("name").strip("/")
                if any(not (c.isdigit() or c in "/-_") for c in name):
                    tags.append(name)
            elif kind == "block":
                edits.append(Edit(here + at, here + pos))
    if comment is not None:  # an unclosed `%%` hides the rest of the note, as in Obsidian
        edits.append(Edit(comment, end, hidden=True))
    edits.sort(key=lambda e: (e.start, e.end))
    return Syntax(tuple(tags), tuple(links), tuple(edits))


def _line_marks(line: str, here: int, edits: list[Edit]) -> int:
    """A callout's `[!type]` and a task's box at the start of `line`: edits, and where the line's
    inline scan starts (after them)."""
    callout = _CALLOUT.match(line)
    if callout is not None:
        title = line[callout.end() :].strip()
        marker = callout.start(1) - 2  # the `[!`
        kind = callout.group(1).strip()
        edits.append(Edit(here + marker, here + callout.end(), "" if title else kind.title()))
        return callout.end()
    task = _TASK.match(line)
    if task is not None:
        edits.append(Edit(here + task.start(1), here + task.end(1)))
        return task.end()
    return 0


def apply(text: str, edits: Sequence[Edit], start: int = 0, end: int | None = None) -> str:
    """`text[start:end]` with the edits inside it made (one crossing a bound is cut to it)."""
    end = len(text) if end is None else end
    out: list[str] = []
    at = start
    for edit in edits:
        if edit.start >= end:
            break
        if edit.end <= start:
            continue
        lo, hi = max(edit.start, start), min(edit.end, end)
        out.append(text[at:lo])
        if edit.start >= start:
            out.append(edit.text)
        at = max(at, hi)
    out.append(text[at:end])
    return "".join(out)


def without_comments(
    text: str, edits: Sequence[Edit], start: int = 0, end: int | None = None
) -> str:
    """`text[start:end]` without its `%%comments%%` (the `hidden` edits), their line breaks kept:
    line numbers still match the file's."""
    hidden = [replace(e, text="\n" * text.count("\n", e.start, e.end)) for e in edits if e.hidden]
    return apply(text, hidden, start, end) if hidden else text[start:end]


def clean(text: str) -> str:
    """`text` as Obsidian shows it (links as their shown text, no comments ...)."""
    return apply(text, scan(text).edits)


def frontmatter_links(value: object) -> list[Link]:
    """Wikilinks in frontmatter values (`related: "[[Other note]]"`), in order."""
    found: list[Link] = []
    if isinstance(value, str):
        for match in re.finditer(r"\[\[([^\[\]\n]*)\]\]", value):
            link, _ = _wikilink(match.group(1), embed=False)
            if link is not None:
                found.append(link)
    elif isinstance(value, dict):
        for inner in value.values():
            found += frontmatter_links(inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            found += frontmatter_links(inner)
    return found


# --- resolving links to notes --------------------------------------------------------------


def _key(path: str) -> str:
    return unicodedata.normalize("NFC", path).casefold()


class Vault:
    """The notes a link can name: `notes` maps each note's source to its aliases; `prefix` is
    what every source starts with before its path in the vault (a NOTE_FOLDERS folder's name and
    `/`; nothing for the inbox)."""

    def __init__(self, notes: Mapping[str, Sequence[str]], prefix: str = "") -> None:
        self.prefix = prefix
        self.paths: dict[str, str] = {}  # vault path (casefolded) -> source
        self.names: dict[str, list[str]] = {}  # file name (casefolded) -> vault paths
        self.aliases: dict[str, list[str]] = {}  # alias (casefolded) -> sources
        for source, aliases in sorted(notes.items()):
            path = _key(source.removeprefix(prefix))
            self.paths[path] = source
            self.names.setdefault(path.rsplit("/", 1)[-1], []).append(path)
            for alias in aliases:
                self.aliases.setdefault(_key(alias.strip()), []).append(source)

    def resolve(self, link: Link, source: str) -> str | None:
        """The source of the note `link` (written in the note `source`) names; None when no
        indexed note is named."""
        written = link.target.replace("\\", "/").strip()
        if not written:
            return None
        folder = posixpath.dirname(source.removeprefix(self.prefix))
        wanted = [written] if written.lower().endswith(NOTE_SUFFIX) else [written + NOTE_SUFFIX]
        if _EXTENSION.search(written) and not written.lower().endswith(NOTE_SUFFIX):
            wanted.insert(0, written)  # `Node.js` may be the note `Node.js.md`, or a file
        for candidate in wanted:
            found = self._path(candidate, folder)
            if found is not None:
                return found
        if "/" not in written:
            owners = sorted(set(self.aliases.get(_key(written), [])))
            if len(owners) == 1:
                return owners[0]
        return None

    def _path(self, written: str, folder: str) -> str | None:
        key = _key(written)
        if key.startswith(("./", "../")):
            joined = posixpath.normpath(posixpath.join(_key(folder), key))
            return self.paths.get(joined)
        key = key.lstrip("/")
        if key in self.paths:
            return self.paths[key]
        name = key.rsplit("/", 1)[-1]
        matches = [p for p in self.names.get(name, []) if p == key or p.endswith("/" + key)]
        if not matches:
            return None
        beside = [p for p in matches if posixpath.dirname(p) == _key(folder)]
        best = min(beside or matches, key=lambda p: (len(p), p))
        return self.paths[best]


def attachment(link: Link) -> bool:
    """A link to a file that is not a note (`image.png`, `slides.pdf`): not counted as
    unresolved when no indexed note matches it."""
    written = link.target.strip()
    return bool(_EXTENSION.search(written)) and not written.lower().endswith(NOTE_SUFFIX)


def resolve_all(vault: Vault, links: Iterable[Link], source: str) -> tuple[list[str], list[str]]:
    """(the notes `source`'s links name, in order, itself left out; the targets of its links
    to notes that are not indexed, as written)."""
    resolved: list[str] = []
    unresolved: list[str] = []
    for link in links:
        found = vault.resolve(link, source)
        if found is None:
            name = link.target.strip()
            if not attachment(link) and name not in unresolved:
                unresolved.append(name)
        elif found != source and found not in resolved:
            resolved.append(found)
    return resolved, unresolved
