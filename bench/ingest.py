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

`--qwen3-shape` instead measures what a user waits for with the shipped model size: the same
notes ingested through an embedder serving the Qwen3-Embedding-0.6B shape (bench/qwen3_shape.py,
random weights, 28 layers) with the shipped defaults (EMBED_BACKEND=auto, EMBED_DTYPE=auto: the
engine measured at its first start), reported as wall time per 1,000 chunks beside the seed
README's "about ten minutes for a thousand chunks", with the embedder's first start (load and
auto's measuring) and a later start (the decision kept) timed apart. Its tokenizer is one token
per word: Qwen3's own gives English prose about 1.3 tokens a word, so real chunks are longer.
`--emulate avx2|avx512-bf16|avx512-vnni` runs it as on another CPU class (bench/research/avx2.py;
the embedder process inherits the CPUID shim): the cores, caches and clocks stay this machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import (
    CRANFIELD,
    REPO_ROOT,
    STOPS,
    BenchError,
    bench_settings,
    describe,
    embedder,
    format_table,
    free_port,
    require_folder,
)
from bench.qwen3_shape import QWEN3_06B, build_apart
from kb.app.backend import open_store
from kb.app.ingest import run
from kb.app.process import Child
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
    """The real client, also counting the texts it sends (EmbedClient.calls counts requests)
    and their words (= tokens, less the end token, with the Qwen3-shape tokenizer)."""

    texts = 0
    words = 0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        self.words += sum(len(text.split()) for text in texts)
        return super().embed_documents(texts)


@dataclass
class Step:
    name: str
    seconds: float
    calls: int  # POST /v1/embeddings
    texts: int  # texts embedded
    notes: int
    chunks: int
    words: int = 0  # in the texts embedded


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
    step = Step(
        name, seconds, client.calls, client.texts, len(summary.ingested), summary.chunks,
        client.words,
    )  # fmt: skip
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


SEED_MIN_PER_1000 = 10.0  # the seed README: "about ten minutes for a thousand chunks"


def _embedder(model: Path, state: Path, log: Path) -> tuple[Child, str]:
    """`python embedder/app.py` on `model` with the shipped defaults (auto engine, measured at
    first start and kept in `state`), no reranker; started, not yet healthy."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("EMBED_", "RERANK_"))},
        "HF_HUB_OFFLINE": "1",
        "EMBED_MODEL": str(model),
        "EMBED_HOST": "127.0.0.1",
        "EMBED_PORT": str(port),
        "EMBED_STATE_DIR": str(state),
        "RERANK_MODEL": "",
        "LOG_LEVEL": "INFO",
    }
    argv = [sys.executable, str(REPO_ROOT / "embedder" / "app.py")]
    return Child("embedder", argv, env=env, log=log), f"http://127.0.0.1:{port}"


def qwen3_shape(docs: Path, files: list[Path]) -> dict[str, Any]:
    """Ingest `files` through a Qwen3-0.6B-shaped embedder with the shipped defaults: wall time
    per 1,000 chunks, and the embedder's first and later start."""
    from bench.research import avx2  # torch: only for this mode
    from embed_server import hardware

    with tempfile.TemporaryDirectory(prefix="kb-bench-qwen3-") as tmp:
        root = Path(tmp)
        print("building the Qwen3-0.6B shape (random weights)...", file=sys.stderr)
        model = build_apart(root / "model", QWEN3_06B["num_hidden_layers"])
        log = root / "embedder.log"
        starts: list[float] = []
        for _ in range(2):  # the first start measures; the second reads the decision
            began = time.perf_counter()
            child, url = _embedder(model, root / "state", log)
            with child:
                health = dict(child.wait_ready(f"{url}/health", 900).json())
                starts.append(time.perf_counter() - began)
                if len(starts) == 2:
                    inbox = root / "notes"
                    inbox.mkdir()
                    for path in files:
                        target = inbox / path.relative_to(docs)
                        target.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(path, target)
                    step = ingest("first", bench_settings(inbox, root / "qdrant", url))
    auto = health.get("auto") or {}
    per_1000 = step.seconds / step.chunks * 1000
    return {
        "engine": f"{health['backend']} {health['dtype']}",
        "query_engine": f"{health['query_engine']['backend']} {health['query_engine']['dtype']}",
        "instruction_tokens_reused": health["query_engine"].get("instruction_tokens_reused"),
        "auto_reason": auto.get("reason"),
        "auto_seconds": auto.get("seconds"),
        "first_start_s": round(starts[0], 1),
        "later_start_s": round(starts[1], 1),
        "notes": step.notes,
        "chunks": step.chunks,
        "tokens_per_chunk": round(step.words / max(1, step.texts) + 1, 1),
        "ingest_s": round(step.seconds, 1),
        "seconds_per_1000_chunks": round(per_1000, 1),
        "minutes_per_1000_chunks": round(per_1000 / 60, 2),
        "seed_minutes_per_1000_chunks": SEED_MIN_PER_1000,
        "cpu_class": hardware.cpu_class(hardware.cpu_features()),
        "emulated": avx2.emulating(),
        "load_average": [round(x, 1) for x in os.getloadavg()],
    }


def qwen3_report(result: dict[str, Any]) -> str:
    return (
        f"Qwen3-0.6B shape, CPU class {result['cpu_class']}"
        f"{' (emulated)' if result['emulated'] else ''}, {os.cpu_count()} cores, load "
        f"{result['load_average'][0]}: {result['chunks']} chunks ({result['tokens_per_chunk']} "
        f"tokens each on average) of {result['notes']} notes in {result['ingest_s']} s with "
        f"{result['engine']} (auto; queries on {result['query_engine']}) = "
        f"{result['minutes_per_1000_chunks']:.1f} min per 1,000 chunks (seed README: about "
        f"{SEED_MIN_PER_1000:.0f} min); embedder first start {result['first_start_s']} s "
        f"(load and auto's measuring, {result['auto_seconds']} s of it), later starts "
        f"{result['later_start_s']} s\nauto: {result['auto_reason']}"
    )


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
    parser.add_argument(
        "--qwen3-shape",
        action="store_true",
        help="wall time per 1,000 chunks through the Qwen3-0.6B shape with the shipped defaults "
        "(default 100 notes; --quick 40)",
    )
    parser.add_argument(
        "--emulate",
        choices=["avx2", "avx512-bf16", "avx512-vnni"],
        help="with --qwen3-shape: run as on another CPU class (bench/research/avx2_only.c)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser()
    args = arguments.parse_args(argv)
    limit = args.limit if args.limit is not None else (100 if args.quick else 300)
    if args.qwen3_shape and args.limit is None:
        limit = 40 if args.quick else 100
    if limit < 1:
        arguments.error("--limit must be at least 1")
    if args.emulate and not args.qwen3_shape:
        arguments.error("--emulate needs --qwen3-shape")
    if args.emulate:
        from bench.research import avx2  # torch: only for this mode

        if not avx2.emulating():
            # CPUID is read when each library loads: a fresh process, this one's arguments
            again = list(sys.argv[1:] if argv is None else argv)
            try:
                return avx2.rerun_emulated(__file__, again, args.emulate)
            except BenchError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
    if args.qwen3_shape:
        try:
            result = qwen3_shape(args.docs, pick_notes(args.docs, limit))
        except STOPS as exc:
            print(f"error: {describe(exc)}", file=sys.stderr)
            return 1
        print(qwen3_report(result))
        if args.json:
            print(json.dumps(result))
        return 0
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
