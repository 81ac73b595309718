"""The judged collections of bench/corpora.py: their queries name their documents, the new
collections have every kind of query with graded judgments, paraphrases really are paraphrases,
and the Obsidian-style vault holds every construct of Obsidian's syntax it is there to exercise."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from helpers import REPO_ROOT

from bench import corpora, retrieval
from kb.content.chunking import headings
from kb.embedding.keywords import tokenize

BENCH = REPO_ROOT / "bench"

COLLECTIONS = {c.name: c for c in corpora.COLLECTIONS}
KINDS = {"exact", "paraphrase", "multi", "how-to"}
NEW = ("vault", "manual", "snippets")  # written with the four kinds
VAULT = COLLECTIONS["vault"].docs


@pytest.mark.parametrize("name", sorted(COLLECTIONS))
def test_every_collection_names_only_its_own_documents_and_says_where_it_comes_from(
    name: str,
) -> None:
    collection = COLLECTIONS[name]
    queries = retrieval.load_queries(collection.queries, collection.docs)
    assert queries
    readme = (collection.queries.parent / "README.md").read_text(encoding="utf-8")
    assert re.search(r"provenance|comes from|distributed", readme, re.I), name
    assert ("held out" in readme.lower()) == collection.held_out, name


@pytest.mark.parametrize("name", NEW)
def test_the_new_collections_have_every_kind_of_query_with_graded_judgments(name: str) -> None:
    collection = COLLECTIONS[name]
    queries = retrieval.load_queries(collection.queries, collection.docs)
    kinds = Counter(q.kind for q in queries)
    assert set(kinds) == KINDS
    assert min(kinds.values()) >= 8, kinds
    if not collection.held_out:
        assert 40 <= len(queries) <= 100
    assert {g for q in queries for g in q.relevant.values()} <= {1.0, 2.0, 3.0}
    assert all(3.0 in q.relevant.values() for q in queries)  # each has an answer
    multi = [q for q in queries if q.kind == "multi"]
    assert all(len(q.relevant) >= 2 for q in multi)


def title_terms(path: Path) -> set[str]:
    """The keyword terms of a document's file name and of every heading in it."""
    text = path.read_text(encoding="utf-8")
    terms = set(tokenize(path.stem))
    for heading in headings(text):
        terms |= set(tokenize(heading.title))
    return terms


@pytest.mark.parametrize("name", NEW)
def test_paraphrases_share_no_word_with_the_titles_or_headings_of_their_answers(
    name: str,
) -> None:
    collection = COLLECTIONS[name]
    shared = {}
    for q in retrieval.load_queries(collection.queries, collection.docs):
        if q.kind != "paraphrase":
            continue
        for source, grade in q.relevant.items():
            common = set(tokenize(q.text)) & title_terms(collection.docs / source)
            if grade == 3 and common:
                shared[q.id] = (source, common)
    assert shared == {}


OBSIDIAN = {
    "wikilink with an alias": r"(?<!!)\[\[[^\]|]+\|[^\]]+\]\]",
    "link to a heading": r"(?<!!)\[\[[^\]#|]+#[^\^\]|][^\]]*\]\]",
    "link to a block": r"(?<!!)\[\[[^\]#|]+#\^[\w-]+\]\]",
    "embedded note": r"!\[\[[^\]]+?(?<!\.png)(?<!\.canvas)\]\]",
    "embedded image": r"!\[\[[^\]]+\.png\]\]",
    "embedded canvas": r"!\[\[[^\]]+\.canvas\]\]",
    "callout": r"^> \[!\w+\] \S",
    "foldable callout": r"^> \[!\w+\]- ",
    "inline comment": r"%%[^%\n]+%%",
    "block comment": r"^%%\n(?:.+\n)+%%$",
    "highlight": r"==[^=\n]+==",
    "open task": r"^\s*- \[ \] \S",
    "done task": r"^\s*- \[x\] \S",
    "task date": r"📅 \d{4}-\d\d-\d\d",
    "block id": r" \^[\w-]+$",
    "nested inline tag": r"(?<![\w/#])#[a-z]+/[a-z]+(?:/[a-z]+)?\b",
    "frontmatter aliases": r"\A---\n(?:.*\n)*?aliases: ",
    "frontmatter description": r"\A---\n(?:.*\n)*?description: ",
    "frontmatter created": r"\A---\n(?:.*\n)*?created: ",
    "dataview query": r"^```dataview$",
    "template placeholder": r"\{\{date",
}


@pytest.mark.parametrize("construct", sorted(OBSIDIAN))
def test_the_vault_exercises_each_construct_of_obsidian_syntax(construct: str) -> None:
    pattern = re.compile(OBSIDIAN[construct], re.M)
    found = [p for p in VAULT.rglob("*.md") if pattern.search(p.read_text(encoding="utf-8"))]
    assert found, construct


def test_the_vault_has_daily_notes_a_canvas_and_the_attachments_it_embeds() -> None:
    daily = sorted(p.name for p in (VAULT / "Daily").glob("*.md"))
    assert len(daily) >= 20 and all(re.fullmatch(r"\d{4}-\d\d-\d\d\.md", n) for n in daily)
    notes = list(VAULT.rglob("*.md"))
    assert 120 <= len(notes) <= 200
    names = {p.name for p in VAULT.rglob("*")}
    linked = {
        m.split("|")[0].split("#")[0]
        for p in notes
        for m in re.findall(r"\[\[([^\]]+)\]\]", p.read_text(encoding="utf-8"))
        if "{{" not in m
    }
    stems = {p.stem for p in notes} | {
        p.relative_to(VAULT).with_suffix("").as_posix() for p in notes
    }
    assert sorted(t for t in linked if t not in stems and t not in names) == []  # none dangle
    (board,) = VAULT.rglob("*.canvas")
    canvas = json.loads(board.read_text(encoding="utf-8"))
    assert {n["type"] for n in canvas["nodes"]} == {"text", "file", "link", "group"}
    ids = {n["id"] for n in canvas["nodes"]}
    assert all(e["fromNode"] in ids and e["toNode"] in ids for e in canvas["edges"])
    for node in canvas["nodes"]:
        if node["type"] == "file":
            assert (VAULT / node["file"]).is_file(), node
    for image in VAULT.rglob("*.png"):
        assert image.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
