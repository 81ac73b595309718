"""Ingest cost: first ingest vs re-ingesting the same notes vs one edited note.

    uv run bench/ingest.py [--docs DIR] [--limit N] [--quick] [--json]

Builds a throwaway notes folder from the first N notes of DOCS (default: 300 Cranfield documents;
--quick: 100) plus a generated long note of about 20 chunks, and ingests it through
kb.ingest.run.run
— the code `ingest.py` runs — into embedded Qdrant, with a real embedder (EMBED_URL when set,
else a MiniLM embedder started for the run). Each step opens the store and the client afresh,
as a new `ingest.py` process would:

1. first      — every note dropped into the empty inbox;
2. rebuild    — `ingest.py --rebuild`: every note in ingested/ re-indexed (in place: notes
                whose points would not change are left alone);
3. re-drop    — every note copied into the inbox again, unchanged;
4. edit       — the long note re-dropped with one paragraph rewritten;
5. recreate   — the collection deleted (a lost Qdrant volume, or a rebuild for a new payload
                layout), then an ingest: every point written again, vectors from the cache;
6. no cache   — the same with EMBED_CACHE off: what re-creating costs without the cache.

For each: wall time, embedding requests (POST /v1/embeddings, EmbedClient.calls) and texts sent
to the embedder. Targets (issue 7): a re-ingest takes <= 5 % of the first ingest's time and makes
0 embedding requests; the edit re-embeds only the changed chunk. With --json the last line is
`{"first_s", "reingest_s", "reingest_embed_calls", "edit_embedded_chunks", ...}` where
"reingest" is the rebuild; the re-drop, re-create and the rest are extra keys.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common import (
    CRANFIELD,
    STOPS,
    BenchError,
    bench_settings,
    describe,
    embedder,
    format_table,
    require_folder,
)
from kb.app.backend import open_store
from kb.app.ingest import run
from kb.content.chunking import chunk_note
from kb.content.notes import read_note
from kb.core.settings import Settings
from kb.embedding.client import EmbedClient
from kb.ingest.options import IngestOptions
from kb.store import collection

LONG_NOTE = "long/field-notes.md"  # source of the generated long note
LONG_SECTIONS = 20  # one chunk each: a section is ~1.1k chars, two do not fit in 1500
EDITED_SECTION = 11
TARGET_RATIO = 0.05
_VOCAB = """boundary layer pressure gradient wing tunnel model flow shock heat transfer surface
velocity profile measurement turbulent laminar separation angle attack nozzle jet mixing drag
lift coefficient experiment theory solution numerical method plate cylinder cone supersonic
subsonic hypersonic mach number reynolds temperature density stagnation point wake vortex
oscillation panel flutter stiffness load buckling shell stress strain creep fatigue sample
notebook observation morning afternoon colleague result table figure draft revision check
"""
_WORDS = _VOCAB.split()


class CountingClient(EmbedClient):
    """The real client, also counting the texts it sends (EmbedClient.calls counts requests)."""

    texts = 0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return super().embed_documents(texts)


@dataclass
class Step:
    name: str
    seconds: float
    calls: int  # POST /v1/embeddings
    texts: int  # texts embedded
    notes: int
    chunks: int


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 16))]
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    while sum(len(s) + 1 for s in out) < chars:
        out.append(_sentence(rng))
    return " ".join(out)


def long_note(edited: bool = False) -> str:
    """A ~20-chunk markdown note; `edited` rewrites one paragraph of one section."""
    rng = random.Random(20240601)
    parts = ["---\ntags: [bench]\ntopic: Generated field notes for the ingest benchmark.\n---\n"]
    parts.append("# Field notes\n")
    for i in range(1, LONG_SECTIONS + 1):
        first, second = _paragraph(rng, 550), _paragraph(rng, 500)
        if edited and i == EDITED_SECTION:
            second = _paragraph(random.Random(7), 520)
        parts.append(f"## Section {i}\n\n{first}\n\n{second}\n")
    return "\n".join(parts)


def pick_notes(docs: Path, limit: int) -> list[Path]:
    """The first `limit` notes of `docs` (sorted by path); BenchError naming --docs when there
    are none. Called before the embedder starts."""
    require_folder(docs, "--docs")
    files = sorted(
        p
        for p in docs.rglob("*")
        if p.suffix in (".md", ".txt")
        and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(docs).parts)
    )[:limit]
    if not files:
        raise BenchError(f"--docs {docs}: no .md or .txt notes in it")
    return files


def build_corpus(docs: Path, files: list[Path], dest: Path) -> int:
    """Copy `files` (notes under `docs`) to `dest` and write the long note."""
    for path in files:
        target = dest / path.relative_to(docs)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    (dest / LONG_NOTE).parent.mkdir(parents=True, exist_ok=True)
    (dest / LONG_NOTE).write_text(long_note(), encoding="utf-8")
    return len(files) + 1


def long_note_chunks(path: Path) -> int:
    return len(chunk_note(read_note(path, LONG_NOTE, max_bytes=path.stat().st_size)))


def drop(corpus: Path, inbox: Path) -> None:
    """Copy every note of `corpus` into the inbox (as a user re-drops notes)."""
    shutil.copytree(corpus, inbox, dirs_exist_ok=True)


def ingest(name: str, settings: Settings, *, rebuild: bool = False, drop: bool = False) -> Step:
    """One ingest as a new process runs it; `drop` deletes the collection first (not timed)."""
    if drop:
        with open_store(settings) as store:
            collection.drop(store)
    started = time.perf_counter()
    with (
        open_store(settings) as store,
        CountingClient(
            settings.EMBED_URL, batch_size=settings.EMBED_BATCH_SIZE, timeout=settings.EMBED_TIMEOUT
        ) as client,
    ):
        summary = run(settings, client, store, IngestOptions(rebuild=rebuild))
    seconds = time.perf_counter() - started
    if summary.failed:
        listed = "; ".join(f"{f.source}: {f.reason}" for f in summary.failed[:5])
        raise BenchError(f"{name}: {len(summary.failed)} notes failed: {listed}")
    step = Step(name, seconds, client.calls, client.texts, len(summary.ingested), summary.chunks)
    print(
        f"{name}: {step.notes} notes, {step.chunks} chunks, {seconds:.1f}s, "
        f"{step.calls} embed requests",
        file=sys.stderr,
    )
    return step


def measure(docs: Path, files: list[Path], embed_url: str) -> tuple[list[Step], int]:
    with tempfile.TemporaryDirectory(prefix="kb-bench-ingest-") as tmp:
        corpus, inbox = Path(tmp) / "corpus", Path(tmp) / "notes"
        inbox.mkdir()
        notes = build_corpus(docs, files, corpus)
        long_chunks = long_note_chunks(corpus / LONG_NOTE)
        print(f"corpus: {notes} notes (long note: {long_chunks} chunks)", file=sys.stderr)
        settings = bench_settings(inbox, Path(tmp) / "qdrant", embed_url)
        drop(corpus, inbox)
        steps = [ingest("first", settings)]
        steps.append(ingest("rebuild", settings, rebuild=True))
        drop(corpus, inbox)
        steps.append(ingest("re-drop", settings))
        (inbox / LONG_NOTE).parent.mkdir(parents=True, exist_ok=True)
        (inbox / LONG_NOTE).write_text(long_note(edited=True), encoding="utf-8")
        steps.append(ingest("edit", settings))
        steps.append(ingest("recreate", settings, drop=True))
        uncached = settings.model_copy(update={"EMBED_CACHE": False})
        steps.append(ingest("recreate, no cache", uncached, drop=True))
    return steps, long_chunks


def report(steps: list[Step], long_chunks: int) -> tuple[str, dict[str, float | int]]:
    by = {s.name: s for s in steps}
    first = by["first"]
    rows = [
        [
            s.name,
            s.notes,
            s.chunks,
            round(s.seconds, 2),
            f"{100 * s.seconds / first.seconds:.1f}%",
            s.calls,
            s.texts,
        ]
        for s in steps
    ]
    table = format_table(
        ["step", "notes", "chunks", "seconds", "vs first", "embed requests", "texts embedded"],
        rows,
    )
    rebuild, redrop, edit = by["rebuild"], by["re-drop"], by["edit"]
    worst = max(rebuild.seconds, redrop.seconds) / first.seconds
    met = worst <= TARGET_RATIO and rebuild.calls == redrop.calls == 0
    verdict = (
        f"re-ingest: {100 * worst:.1f}% of the first ingest's time (target <= "
        f"{100 * TARGET_RATIO:.0f}%), {rebuild.calls + redrop.calls} embed requests (target 0): "
        f"{'met' if met else 'NOT met'}; edit re-embedded {edit.texts} of the long note's "
        f"{long_chunks} chunks"
    )
    result: dict[str, float | int] = {
        "first_s": round(first.seconds, 3),
        "reingest_s": round(rebuild.seconds, 3),
        "reingest_embed_calls": rebuild.calls,
        "edit_embedded_chunks": edit.texts,
        "first_embed_calls": first.calls,
        "first_chunks": first.chunks,
        "redrop_s": round(redrop.seconds, 3),
        "redrop_embed_calls": redrop.calls,
        "edit_s": round(edit.seconds, 3),
        "long_note_chunks": long_chunks,
    }
    for name, key in [("recreate", "recreate"), ("recreate, no cache", "recreate_nocache")]:
        result[f"{key}_s"] = round(by[name].seconds, 3)
        result[f"{key}_embed_calls"] = by[name].calls
    return f"{table}\n{verdict}", result


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Time and embedding requests of a first ingest, re-ingests and one edit."
    )
    parser.add_argument(
        "--docs", type=Path, default=CRANFIELD / "docs", help="notes to copy (default: Cranfield)"
    )
    parser.add_argument("--limit", type=int, help="notes taken from --docs (default 300)")
    parser.add_argument("--quick", action="store_true", help="100 notes: well under 3 minutes")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser()
    args = arguments.parse_args(argv)
    limit = args.limit if args.limit is not None else (100 if args.quick else 300)
    if limit < 1:
        arguments.error("--limit must be at least 1")
    try:
        files = pick_notes(args.docs, limit)  # before the embedder starts
        with embedder() as url:
            steps, long_chunks = measure(args.docs, files, url)
    except STOPS as exc:
        print(f"error: {describe(exc)}", file=sys.stderr)
        return 1
    text, result = report(steps, long_chunks)
    print(text)
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
