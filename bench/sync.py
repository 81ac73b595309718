"""Convergent sync and watch mode: does the index follow a folder exactly, and how fast?

    uv run bench/sync.py [--notes N] [--ops N] [--rounds N] [--seed S] [--quick] [--json]

Builds a throwaway NOTE_FOLDERS folder of N generated notes (default 300; --quick 60), syncs it
through kb.ingest.run.run (what `ingest.py` runs) into embedded Qdrant with a real embedder
(EMBED_URL when set, else a MiniLM embedder started for the run), then applies --ops random
operations (default 200; --quick 40; seeded) in --rounds rounds: add, edit, rename or move, and
delete. Each round syncs its adds, edits and deletes, then its renames on their own, so the
texts embedded for renames are counted apart. After every sync the collection is compared with
the folder:

- orphans — visible points that no current file has (a chunk left behind, a stale chunk id);
- missing — notes whose current chunks are not all stored as they are now (absent or stale);
- rename embeds — texts sent to the embedder by the rename-only syncs (EmbedClient calls).

Then the watcher (kb.app.watch, what `ingest.py --watch` runs) is started on the folder and a new
small note is saved --samples times (default 20; --quick 5): watch latency is the time from
the write to the first search that returns the note. Targets (issue 12): 0 orphans, 0 missing,
0 embeds for renames, watch p50 <= 3 s. With --json the last line is
`{"orphans", "missing", "rename_embeds", "watch_p50_s", ...}`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import STOPS, bench_settings, cpu_name, describe, embedder, format_table
from kb.app.backend import Backend, embed_client, open_store
from kb.app.ingest import run
from kb.app.watch import Watcher
from kb.content.chunking import chunk_note
from kb.content.notes import read_note
from kb.core.schema import point_id
from kb.core.settings import Settings
from kb.embedding.client import EmbedClient
from kb.ingest.options import IngestOptions
from kb.search.query import search
from kb.store import collection
from kb.store.points import Store

FOLDER = "vault"
TARGET_WATCH_P50_S = 3.0
WATCH_TIMEOUT_S = 60.0
_VOCAB = """kimchi cabbage garlic ginger bread dough oven crust shock wave pressure density
garden tomato seedling frost compost rust borrow lifetime trait python pytest fixture scope
river bridge mountain trail camera lens aperture shutter violin bow string rosin chess opening
endgame pawn bishop knight harbour ferry tide lantern copper kettle sparrow meadow orchard
"""
_WORDS = _VOCAB.split()


class CountingClient(EmbedClient):
    """The real client, also counting the texts it sends (EmbedClient.calls counts requests)."""

    texts = 0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return super().embed_documents(texts)


def note_text(rng: random.Random, n: int) -> str:
    """A small note with a `#` title (so a rename leaves what is embedded unchanged)."""
    body = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(25, 60)))
    return f"# Note {n} about {rng.choice(_WORDS)}\n\n{body.capitalize()}.\n"


@dataclass
class Folder:
    """The generated folder and the operations applied to it (seeded)."""

    root: Path
    rng: random.Random
    made: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def files(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*.md") if p.is_file())

    def add(self) -> None:
        self.made += 1
        path = self.root / f"topic{self.rng.randrange(8)}" / f"note-{self.made:05}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(note_text(self.rng, self.made), encoding="utf-8")

    def apply(self, op: str) -> None:
        self.counts[op] = self.counts.get(op, 0) + 1
        if op == "add":
            return self.add()
        path = self.rng.choice(self.files())
        if op == "edit":
            words = " ".join(self.rng.choice(_WORDS) for _ in range(12))
            path.write_text(path.read_text(encoding="utf-8") + f"\nEdited: {words}.\n", "utf-8")
        elif op == "delete":
            path.unlink()
        else:  # rename in place, or move to another folder under the same name
            self.made += 1
            if self.rng.random() < 0.5:
                target = path.with_name(f"renamed-{self.made:05}.md")
            else:
                target = self.root / f"moved{self.rng.randrange(4)}" / path.name
                if target.exists():
                    target = target.with_name(f"moved-{self.made:05}.md")
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)


def compare(store: Store, folder: Folder, max_bytes: int) -> tuple[int, int]:
    """(orphan points, missing notes) of the collection against the folder's files."""
    wanted: dict[str, dict[str, str]] = {}  # source -> {point id: chunk text}
    for path in folder.files():
        source = f"{FOLDER}/{path.relative_to(folder.root).as_posix()}"
        note = read_note(path, source, max_bytes=max_bytes)
        chunks = chunk_note(note)
        wanted[source] = {point_id(source, i): c.text for i, c in enumerate(chunks)}
    visible = {pid: p for pid, p in store.payloads() if not p.get("deleted_at")}
    expected = {pid for points in wanted.values() for pid in points}
    orphans = len(set(visible) - expected)
    missing = sum(
        1
        for points in wanted.values()
        if any(pid not in visible or visible[pid].get("text") != t for pid, t in points.items())
    )
    return orphans, missing


def sync(settings: Settings, store: Store, client: CountingClient) -> int:
    """One sync of the folder (as `ingest.py` runs it); the texts it embedded."""
    before = client.texts
    summary = run(settings, client, store, IngestOptions(allow_deletes=True))
    if summary.failed:
        raise RuntimeError(f"{len(summary.failed)} notes failed: {summary.failed[:3]}")
    return client.texts - before


@dataclass
class Result:
    notes: int
    ops: dict[str, int]
    rounds: list[list[object]]
    orphans: int
    missing: int
    rename_embeds: int
    latencies: list[float]


def measure(args: argparse.Namespace, embed_url: str) -> Result:
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="kb-bench-sync-") as tmp:
        folder = Folder(Path(tmp) / FOLDER, rng)
        folder.root.mkdir()
        (Path(tmp) / "inbox").mkdir()
        for _ in range(args.notes):
            folder.add()
        settings = bench_settings(
            Path(tmp) / "inbox", Path(tmp) / "qdrant", embed_url,
            NOTE_FOLDERS=f"{FOLDER}={folder.root}", NOTE_FOLDERS_GIT=False,
        )  # fmt: skip
        client = CountingClient(settings.EMBED_URL, batch_size=settings.EMBED_BATCH_SIZE)
        rows: list[list[object]] = []
        orphans = missing = rename_embeds = 0
        with client, open_store(settings) as store:
            started = time.perf_counter()
            embedded = sync(settings, store, client)
            o, m = compare(store, folder, settings.NOTE_MAX_BYTES)
            rows.append(["first", args.notes, 0, embedded, "", o, m, time.perf_counter() - started])
            orphans, missing = max(orphans, o), max(missing, m)
            per_round = [args.ops // args.rounds + (r < args.ops % args.rounds)
                         for r in range(args.rounds)]  # fmt: skip
            for r, count in enumerate(per_round, 1):
                ops = rng.choices(["add", "edit", "rename", "delete"], k=count)
                started = time.perf_counter()
                for op in (o for o in ops if o != "rename"):
                    folder.apply(op)
                embedded = sync(settings, store, client)
                renames = ops.count("rename")
                for _ in range(renames):
                    folder.apply("rename")
                rename_texts = sync(settings, store, client)
                rename_embeds += rename_texts
                o, m = compare(store, folder, settings.NOTE_MAX_BYTES)
                orphans, missing = max(orphans, o), max(missing, m)
                seconds = time.perf_counter() - started
                rows.append([f"round {r}", len(ops) - renames, renames, embedded, rename_texts,
                             o, m, seconds])  # fmt: skip
                print(f"round {r}: {len(ops)} ops, {o} orphans, {m} missing", file=sys.stderr)
        latencies = watch_latency(settings, folder, args.samples)
        return Result(args.notes, folder.counts, rows, orphans, missing, rename_embeds, latencies)


def watch_latency(settings: Settings, folder: Folder, samples: int) -> list[float]:
    """Seconds from saving a new note to the first search that returns it, `samples` times."""
    backend = Backend(settings)
    stop = threading.Event()
    watcher = Watcher(backend, stop=stop)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    latencies: list[float] = []
    try:
        end = time.monotonic() + WATCH_TIMEOUT_S
        while watcher.batches < 1:  # the first, full batch: nothing changed since the rounds
            if time.monotonic() > end or not thread.is_alive():
                raise RuntimeError("the watcher did not finish its first batch")
            time.sleep(0.05)
        with embed_client(settings) as searcher:
            for n in range(samples):
                word = f"zq{n}x{folder.rng.randrange(10**6)}"
                path = folder.root / "watched" / f"{word}.md"
                path.parent.mkdir(exist_ok=True)
                saved = time.perf_counter()
                path.write_text(f"# {word}\n\nThe watch probe {word}.\n", encoding="utf-8")
                source = f"{FOLDER}/watched/{word}.md"
                while not any(
                    h.source == source
                    for h in search(backend.store(), searcher, word, k=3, mode="keyword")
                ):
                    if time.perf_counter() - saved > WATCH_TIMEOUT_S:
                        raise RuntimeError(f"{source} was not searchable after {WATCH_TIMEOUT_S}s")
                    time.sleep(0.02)
                latencies.append(time.perf_counter() - saved)
                time.sleep(0.5)  # the next note is a new save, not part of this burst
        collection.require(backend.store())
    finally:
        stop.set()
        thread.join(60)
        backend.close()
    return latencies


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def report(result: Result, cpu: str) -> tuple[str, dict[str, object]]:
    table = format_table(
        ["sync", "ops", "renames", "texts embedded", "rename texts", "orphans", "missing", "s"],
        result.rounds,
    )
    renames = result.ops.get("rename", 0)
    p50, p95 = percentile(result.latencies, 0.5), percentile(result.latencies, 0.95)
    met = result.orphans == result.missing == result.rename_embeds == 0 and p50 <= 3.0
    lines = [
        table,
        f"operations: {', '.join(f'{n} {op}' for op, n in sorted(result.ops.items()))} "
        f"on {result.notes} notes",
        f"orphan points {result.orphans}, missing notes {result.missing}, texts embedded for "
        f"{renames} renames {result.rename_embeds} "
        f"({result.rename_embeds / max(1, renames):.2f} per rename)",
        f"watch latency save -> searchable over {len(result.latencies)} notes: p50 {p50:.2f}s, "
        f"p95 {p95:.2f}s (target p50 <= {TARGET_WATCH_P50_S:.0f}s)",
        f"targets {'met' if met else 'NOT met'}; CPU: {cpu}",
    ]
    data: dict[str, object] = {
        "orphans": result.orphans,
        "missing": result.missing,
        "rename_embeds": result.rename_embeds,
        "watch_p50_s": round(p50, 3),
        "watch_p95_s": round(p95, 3),
        "renames": renames,
        "ops": result.ops,
        "notes": result.notes,
        "cpu": cpu,
    }
    return "\n".join(lines), data


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, help="notes in the folder (default 300)")
    parser.add_argument("--ops", type=int, help="random operations (default 200)")
    parser.add_argument("--rounds", type=int, help="rounds, a sync after each (default 10)")
    parser.add_argument("--samples", type=int, help="notes saved to time the watcher (20)")
    parser.add_argument("--seed", type=int, default=12, help="random seed (default 12)")
    parser.add_argument("--quick", action="store_true", help="60 notes, 40 ops, 4 rounds")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser()
    args = arguments.parse_args(argv)
    quick = args.quick
    args.notes = args.notes if args.notes is not None else (60 if quick else 300)
    args.ops = args.ops if args.ops is not None else (40 if quick else 200)
    args.rounds = args.rounds if args.rounds is not None else (4 if quick else 10)
    args.samples = args.samples if args.samples is not None else (5 if quick else 20)
    if min(args.notes, args.rounds, args.samples) < 1 or args.ops < 0:
        arguments.error("--notes, --rounds and --samples must be at least 1, --ops at least 0")
    try:
        with embedder() as url:
            result = measure(args, url)
    except (*STOPS, RuntimeError) as exc:
        print(f"error: {describe(exc)}", file=sys.stderr)
        return 1
    text, data = report(result, cpu_name())
    print(text)
    if args.json:
        print(json.dumps(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
