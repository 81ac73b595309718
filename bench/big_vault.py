"""A big vault, words first: how soon every note is findable by a word only it contains, how
soon all are embedded, and the peak memory of each process (issue 50).

    uv run bench/big_vault.py [--notes N] [--quick] [--words-only] [--check N] [--json]

Writes N synthetic one-chunk notes (default 10,000; --quick: 2,000) into a throwaway inbox,
each a few sentences of common words plus one word of its own, then ingests them with the code
`ingest.py` and the MCP server's watcher run (kb.app.ingest.run) into embedded Qdrant, with a
real embedder (EMBED_URL when set, else the MiniLM test model started for the run, fp32).

Measured side by side in the one run:
- findable: seconds from the start until every note is stored by its words (the run starts to
  embed); right then a sample of notes is searched by their own word (keyword mode), while
  embedding is under way. Before issue 50 a note became findable only once embedded, so the
  old time until every note was findable is the run's whole time (`all embedded`).
- all embedded: seconds until the run ends, every note embedded (not with --words-only, which
  stops the run there: on a slow or busy machine embedding N notes takes most of an hour);
- then every note is searched by its word once more (each must be the first hit; --check N:
  a random sample of N, since at 100,000 notes searching each takes longer than the run);
- peak RSS (VmHWM) of this process, which ran the ingest as ingest.py or the server would, and
  of the embedder process.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import EMBEDDER_PIDS, bench_settings, cpu_name, embedder
from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.core.errors import IngestError
from kb.embedding.keywords import query_vector
from kb.ingest.options import IngestOptions
from kb.ingest.progress import Progress
from kb.store.points import Store

WORDS = [
    "the", "a", "note", "about", "meeting", "project", "plan", "idea", "draft", "garden",
    "recipe", "book", "travel", "budget", "review", "weekly", "call", "design", "code", "test",
    "release", "bug", "fix", "team", "client", "email", "summary", "question", "answer",
    "morning", "evening", "paper", "article", "reading", "list", "task", "done", "later",
]  # fmt: skip
SAMPLE = 300  # notes searched while embedding is under way


def own_word(n: int) -> str:
    """A word only note `n` contains (letters only: one keyword term of its own)."""
    letters = ""
    while True:
        n, digit = divmod(n, 26)
        letters += chr(ord("a") + digit)
        if n == 0:
            return "zq" + letters + "vx"


def write_vault(folder: Path, notes: int) -> None:
    rng = random.Random(50)
    for n in range(notes):
        filler = " ".join(rng.choice(WORDS) for _ in range(40))
        text = f"# Note {n}\n\n{filler.capitalize()}. It mentions {own_word(n)} once.\n"
        (folder / f"note-{n:05d}.md").write_text(text, encoding="utf-8")


class Clock(Progress):
    """When the run started embedding: every note was stored by its words then."""

    def __init__(self) -> None:
        self.words_done = threading.Event()

    def embedding(self, notes: int, chunks: int) -> None:
        self.words_done.set()


def peak_rss_mb(pid: int | None = None) -> float | None:
    """VmHWM of a process (this one by default), in MB; None when it cannot be read."""
    if pid is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def found_first(store: Store, n: int) -> bool:
    """Whether keyword search's first hit for note `n`'s own word is note `n` (the store's
    query, as search_notes' keyword mode sends it, without the rankings a full search adds)."""
    hits = store.query(1, keyword=query_vector(own_word(n)))
    return bool(hits) and hits[0].source == f"note-{n:05d}.md"


def measure(notes: int, *, words_only: bool = False, check: int | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kb-big-vault-") as tmp, embedder() as url:
        inbox = Path(tmp) / "notes"
        inbox.mkdir()
        write_vault(inbox, notes)
        settings = bench_settings(inbox, Path(tmp) / "qdrant", url, LOG_LEVEL="WARNING")
        clock, stop = Clock(), threading.Event()
        with open_store(settings) as store, embed_client(settings) as client:
            outcome: list[BaseException] = []

            def go() -> None:
                try:
                    run(settings, client, store, IngestOptions(progress=clock, stop=stop))
                except IngestError as exc:
                    if not stop.is_set():
                        outcome.append(exc)
                except BaseException as exc:  # reported below, not lost in the thread
                    outcome.append(exc)

            started = time.monotonic()
            thread = threading.Thread(target=go, daemon=True)
            thread.start()
            clock.words_done.wait()
            findable_s = time.monotonic() - started
            sample = random.Random(7).sample(range(notes), min(SAMPLE, notes))
            missed_early = [n for n in sample if not found_first(store, n)]
            sampled_s = time.monotonic() - started
            print(
                f"every note stored by its words after {findable_s:.1f}s; {len(missed_early)} "
                f"of {len(sample)} sampled notes missed by {sampled_s:.1f}s",
                file=sys.stderr,
                flush=True,
            )
            if words_only:
                stop.set()  # the run ends after the group it embeds
            thread.join()
            embedded_s = None if words_only else time.monotonic() - started
            if outcome:
                raise outcome[0]
            checked = (
                range(notes)
                if check is None or check >= notes
                else random.Random(11).sample(range(notes), check)
            )
            missed = [n for n in checked if not found_first(store, n)]
            embedder_pid = EMBEDDER_PIDS.get(url)
            return {
                "cpu": cpu_name(),
                "notes": notes,
                "findable_s": round(findable_s, 1),
                "sample_searched_by_s": round(sampled_s, 1),
                "sample_missed_while_embedding": len(missed_early),
                "all_embedded_s": None if embedded_s is None else round(embedded_s, 1),
                "checked_after": len(checked),
                "missed_after": len(missed),
                "ratio": round(embedded_s / findable_s, 1) if embedded_s and findable_s else None,
                "ingest_peak_rss_mb": round(peak_rss_mb() or 0.0),
                "embedder_peak_rss_mb": round(peak_rss_mb(embedder_pid) or 0.0)
                if embedder_pid
                else None,
            }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=None, help="notes in the vault (10000)")
    parser.add_argument("--quick", action="store_true", help="2,000 notes")
    parser.add_argument(
        "--words-only",
        action="store_true",
        help="stop once every note is findable by its words (no time until all embedded)",
    )
    parser.add_argument(
        "--check", type=int, default=None, help="search a sample of N notes after (all)"
    )
    parser.add_argument("--json", action="store_true", help="the figures as JSON, last")
    args = parser.parse_args()
    notes = args.notes or (2_000 if args.quick else 10_000)
    figures = measure(notes, words_only=args.words_only, check=args.check)
    print(f"CPU: {figures['cpu']}; {notes} one-chunk notes, MiniLM fp32 unless EMBED_URL")
    embedded = (
        "embedding stopped there (--words-only)"
        if figures["all_embedded_s"] is None
        else f"all embedded after {figures['all_embedded_s']}s (before issue 50: findable only "
        f"then): {figures['ratio']}x sooner"
    )
    print(
        f"every note findable by its words after {figures['findable_s']}s "
        f"(a sample of {min(SAMPLE, notes)} searched by {figures['sample_searched_by_s']}s, "
        f"{figures['sample_missed_while_embedding']} missed); {embedded}; "
        f"{figures['missed_after']} of {figures['checked_after']} missed after (keyword search)"
    )
    print(
        f"peak RSS: ingest {figures['ingest_peak_rss_mb']} MB, "
        f"embedder {figures['embedder_peak_rss_mb']} MB"
    )
    if args.json:
        print(json.dumps(figures))
    return 1 if figures["missed_after"] or figures["sample_missed_while_embedding"] else 0


if __name__ == "__main__":
    sys.exit(main())
