"""The judged collections bench/retrieval.py measures with `--all`: each a folder of documents
and a queries file (the format is in bench/README.md), with where it comes from in its own
README.md. Development collections steer decisions; a held-out one is only reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bench.common import CRANFIELD, REPO_ROOT, documents

DATASETS = REPO_ROOT / "bench" / "datasets"


@dataclass(frozen=True)
class Collection:
    name: str
    source: Path  # the folder ingested, or an archive of it (common.documents)
    queries: Path
    domain: Literal["prose", "code"]  # the collection its files go to and are searched in
    about: str
    # held out: measured only to report how a choice made on the others carries over, never
    # to make one (its numbers are not in the gate's baseline either)
    held_out: bool = False

    @property
    def docs(self) -> Path:
        """The folder ingested (an archive unpacked for this run)."""
        return documents(self.source, self.name)


COLLECTIONS: tuple[Collection, ...] = (
    Collection(
        "cranfield",
        CRANFIELD / "docs",
        CRANFIELD / "queries.jsonl",
        "prose",
        "1,400 aeronautics abstracts, 225 long queries with graded judgments",
    ),
    Collection(
        "notes",
        REPO_ROOT / "bench" / "notes_corpus" / "notes",
        REPO_ROOT / "bench" / "notes_corpus" / "queries.jsonl",
        "prose",
        "39 hand-written personal notes: recipes, incidents, travel, code snippets",
    ),
    Collection(
        "code",
        DATASETS / "code" / "kb.tar.gz",
        DATASETS / "code" / "queries.jsonl",
        "code",
        "a frozen copy of this repository's kb/ (61 Python files), 24 code questions",
    ),
    Collection(
        "vault",
        DATASETS / "vault" / "notes",
        DATASETS / "vault" / "queries.jsonl",
        "prose",
        "an Obsidian-style vault: 144 short linked notes, daily notes, callouts, properties",
    ),
    Collection(
        "manual",
        DATASETS / "manual" / "docs",
        DATASETS / "manual" / "queries.jsonl",
        "prose",
        "documentation of a job-queue library: 39 pages of concepts, how-tos and reference",
    ),
    Collection(
        "commands",
        DATASETS / "commands" / "pages",
        DATASETS / "commands" / "queries.jsonl",
        "prose",
        "125 tldr command pages, 43 queries written blind: 35 of them paraphrases of a need",
    ),
    Collection(
        "snippets",
        DATASETS / "snippets" / "notes",
        DATASETS / "snippets" / "queries.jsonl",
        "prose",
        "held out: 37 short technical notes, one trick each, in topic folders",
        held_out=True,
    ),
)


def dev_collections() -> list[Collection]:
    return [c for c in COLLECTIONS if not c.held_out]
