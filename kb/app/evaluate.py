"""Self-evaluation on the user's own notes: `uv run eval.py` (`make eval`).

A query set is built from what the index holds: each note's title, its section headings, its
`topic:` and its frontmatter `description:`, each with that note as the answer; a text
that names several notes is left out, and at most `limit` queries are kept, picked the same way
each time. With LLM_URL set, each query is reworded by that model first (the user's own model:
nothing leaves the machine but what it is configured to reach), which makes the set harder than
words copied from the notes. Every query runs through kb.search.search in keyword, semantic and
hybrid mode, and reranked when the embedder serves a reranker; R@5, MRR@10 and nDCG@10 are
printed per mode.

Each run appends a line to STATE_DIR/eval-history.jsonl (owner-only: figures, models, settings
and a hash of the query set, never a query or note text) and is compared with the last run on
the same query set: a metric fallen by more than WORSE_BY is named, with what changed since (the
model, the chunker, a search setting). Queries and note text never reach the log.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import random
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kb.app import ingest
from kb.app.backend import embed_client, open_store, searcher
from kb.app.cli import fail, script, setup_logging
from kb.app.notes import open_notes
from kb.content.chunking import CHUNKER_VERSION
from kb.content.notes import NoteError, split_frontmatter
from kb.core.settings import Settings, get_settings
from kb.core.state import PRIVATE_FILE, private_folder
from kb.search import Searcher, SearchRequest, fresh, search
from kb.search import answer as llm
from kb.sources import registry
from kb.store import collection

log = logging.getLogger(__name__)
HISTORY = "eval-history.jsonl"
WORSE_BY = 0.02  # a fall in any metric beyond this is reported as worse
K = 10
MODES = ("keyword", "semantic", "hybrid", "hybrid+rerank")
# the settings a search depends on: a change of one is named when results got worse
SEARCH_SETTINGS = ("EMBED_MAX_CHARS", "RERANK_CANDIDATES", "RERANK_WEIGHT", "RERANK_MAX_CHARS",
                   "INDEX_EXTENSIONS", "NOTE_MAX_BYTES")  # fmt: skip
PARAPHRASE = (
    "You reword search queries. For each numbered query, write one query a person would type "
    "to find the same note, in other words (no word of the original where a synonym exists). "
    "Answer with the numbered list only, one per line, in the same order."
)
PER_REQUEST = 20  # queries reworded per LLM request
KINDS = ("title", "description", "topic", "heading")


@dataclass(frozen=True)
class Query:
    text: str
    answer: str  # the note's source
    kind: str  # title, heading, topic


def build(searcher: Searcher, limit: int = 200, seed: int = 32) -> list[Query]:
    """The query set of the notes the index holds (see the module docstring)."""
    candidates: dict[str, set[tuple[str, str]]] = {}
    for store, _ in searcher.collections().values():
        if collection.info(store) is None:
            continue
        for _, payload in store.payloads():
            if payload.get("deleted_at") or payload.get("kind", "note") != "note":
                continue
            source = payload.get("source")
            if not isinstance(source, str):
                continue
            texts = [("title", payload.get("title")), ("topic", payload.get("topic"))]
            if payload.get("chunk_index") == 0:
                texts.append(("description", _description(source, searcher)))
            headings = payload.get("heading_path") or []
            texts += [("heading", h) for h in headings if isinstance(h, str)]
            for kind, text in texts:
                if isinstance(text, str) and len(text.split()) >= 2:
                    key = " ".join(text.split()).strip(" #")
                    if key and key.lower() != Path(source).stem.lower():
                        candidates.setdefault(key, set()).add((source, kind))
    found = [
        # one kind per text, the same in every process: a title before a heading
        Query(text, *min(answers, key=lambda a: (KINDS.index(a[1]), a[0])))
        for text, answers in sorted(candidates.items())
        if len({source for source, _ in answers}) == 1  # ambiguous texts left out
    ]
    if len(found) > limit:
        found = sorted(random.Random(seed).sample(found, limit), key=lambda q: q.text)
    return found


def _description(source: str, searcher: Searcher) -> str | None:
    """A Markdown note's frontmatter `description:` as its file says now (the index keeps
    only `topic:`)."""
    path = fresh.file_of(source, searcher.roots)
    if path is None or path.suffix.lower() not in (".md", ".markdown") or path.is_symlink():
        return None
    try:
        with path.open("rb") as handle:
            head = handle.read(64_000).decode("utf-8", "replace")
        meta, _ = split_frontmatter(head, path)
    except (OSError, NoteError):
        return None
    found = meta.get("description")
    return found if isinstance(found, str) else None


def paraphrased(settings: Settings, queries: Sequence[Query]) -> list[Query]:
    """Each query reworded by the model at LLM_URL (kept as it is where the answer has no line
    for it). AnswerError when the model cannot be reached."""
    out: list[Query] = []
    for start in range(0, len(queries), PER_REQUEST):
        batch = list(queries[start : start + PER_REQUEST])
        asked = "\n".join(f"{i}. {q.text}" for i, q in enumerate(batch, 1))
        reply = llm.complete(settings.LLM_URL, PARAPHRASE, asked, model=settings.LLM_MODEL,
                             api_key=settings.LLM_API_KEY, timeout=settings.LLM_TIMEOUT,
                             max_tokens=40 * len(batch), temperature=0.7)  # fmt: skip
        lines = dict(_numbered(reply))
        out += [Query(lines.get(i, q.text), q.answer, q.kind) for i, q in enumerate(batch, 1)]
    return out


def _numbered(reply: str) -> list[tuple[int, str]]:
    found = []
    for line in reply.splitlines():
        match = re.match(r"\s*(\d+)[.)]\s*(.+)", line)
        if match and match.group(2).strip():
            found.append((int(match.group(1)), match.group(2).strip()))
    return found


def scores(ranked: Sequence[str | None], answer: str) -> dict[str, float]:
    """R@5, MRR@10 and nDCG@10 of one query with one relevant note."""
    rank = next((i for i, source in enumerate(ranked[:K], 1) if source == answer), None)
    return {
        "r@5": 1.0 if rank is not None and rank <= 5 else 0.0,
        "mrr@10": 1.0 / rank if rank else 0.0,
        "ndcg@10": 1.0 / math.log2(rank + 1) if rank else 0.0,
    }


def evaluate(searcher: Searcher, queries: Sequence[Query]) -> dict[str, dict[str, float]]:
    """The mean metrics per mode (hybrid+rerank only when a reranker serves)."""
    modes = list(MODES)
    if searcher.client.reranker_off:
        modes.remove("hybrid+rerank")
    out: dict[str, dict[str, float]] = {}
    for label in modes:
        mode, reranked = label.split("+")[0], label.endswith("+rerank")
        rows = []
        for query in queries:
            request = SearchRequest(query.text, K, mode=mode, rerank=reranked)  # type: ignore[arg-type]
            found = search(searcher, request)
            if reranked and not found.reranked:
                break  # the reranker is down or off: no row rather than a wrong one
            rows.append(scores([h.source for h in found.hits], query.answer))
        else:
            out[label] = {m: round(sum(r[m] for r in rows) / len(rows), 4) for m in rows[0]}
    return out


def fingerprint(queries: Sequence[Query]) -> str:
    """A hash of the query set: runs on the same set are compared (never the texts)."""
    text = json.dumps([asdict(q) for q in queries], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def record(settings: Settings, searcher: Searcher, queries: Sequence[Query],
           metrics: dict[str, dict[str, float]], reworded: bool) -> dict[str, Any]:  # fmt: skip
    """One history line: figures, what produced them, no text."""
    info = collection.info(searcher.store)
    return {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "collection": searcher.store.collection,
        "model": info.model if info else None,
        "chunker_version": CHUNKER_VERSION,
        "settings": {name: str(getattr(settings, name)) for name in SEARCH_SETTINGS},
        "queries": len(queries),
        "query_set": fingerprint(queries),
        "paraphrased": reworded,
        "metrics": metrics,
    }


def history(state_dir: Path) -> list[dict[str, Any]]:
    try:
        lines = (state_dir / HISTORY).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out


def keep(state_dir: Path, line: dict[str, Any]) -> None:
    """Append `line` to the history (the file is its user's alone)."""
    path = private_folder(state_dir) / HISTORY
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
    with os.fdopen(fd, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def worse(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What fell by more than WORSE_BY since `before`, and what changed meanwhile."""
    fallen = []
    for mode, metrics in now["metrics"].items():
        for name, value in metrics.items():
            old = before.get("metrics", {}).get(mode, {}).get(name)
            if isinstance(old, int | float) and old - value > WORSE_BY:
                fallen.append(f"{mode} {name} {old:.3f} -> {value:.3f}")
    if not fallen:
        return []
    changed = [f"{key} {before.get(key)} -> {now[key]}" for key in ("model", "chunker_version")
               if before.get(key) != now[key]]  # fmt: skip
    old_settings = before.get("settings", {})
    for name, value in now["settings"].items():
        if old_settings.get(name) != value:
            changed.append(f"{name} {old_settings.get(name)} -> {value}")
    cause = "; changed since: " + ", ".join(changed) if changed else "; nothing recorded changed"
    return [f"worse than the evaluation of {before.get('at')}: " + ", ".join(fallen) + cause]


def report(measured: dict[str, Any]) -> str:
    line, kinds = measured["line"], measured["kinds"]
    made = ", ".join(f"{n} {kind}s" for kind, n in kinds.items() if n)
    how = ", reworded by LLM_URL" if line["paraphrased"] else ""
    metrics: dict[str, dict[str, float]] = line["metrics"]
    lines = [f"{line['queries']} queries from your notes ({made}){how}",
             f"{'mode':<15} {'R@5':>6} {'MRR@10':>7} {'nDCG@10':>8}"]  # fmt: skip
    for mode, m in metrics.items():
        lines.append(f"{mode:<15} {m['r@5']:>6.3f} {m['mrr@10']:>7.3f} {m['ndcg@10']:>8.3f}")
    return "\n".join(lines)


def measure(
    settings: Settings, searcher: Searcher, limit: int, paraphrase: bool
) -> dict[str, Any] | None:
    """The queries built from the index, run in every mode: the history line and the queries
    per kind (JSON values: the MCP server measures for eval.py while it holds the storage);
    None without a query."""
    queries = build(searcher, limit)
    if not queries:
        return None
    reworded = bool(settings.LLM_URL) and paraphrase
    if reworded:
        queries = paraphrased(settings, queries)
    metrics = evaluate(searcher, queries)
    line = record(settings, searcher, queries, metrics, reworded)
    kinds = {kind: sum(1 for q in queries if q.kind == kind) for kind in KINDS}
    return {"line": line, "kinds": kinds}


def run_eval(settings: Settings, measured: dict[str, Any] | None, args: argparse.Namespace) -> int:
    """What was measured, kept in the history and compared with the last run on its queries."""
    if measured is None:
        return fail("no queries: the index holds no note with a title, heading or topic of two "
                    "words or more; ingest notes first (uv run ingest.py)")  # fmt: skip
    line = measured["line"]
    earlier = [h for h in history(settings.STATE_DIR) if h.get("query_set") == line["query_set"]]
    keep(settings.STATE_DIR, line)
    log.info("eval queries=%d set=%s", line["queries"], line["query_set"])
    if args.json:
        print(json.dumps(line))
    else:
        print(report(measured))
    fallen = worse(earlier[-1], line) if earlier else []
    for message in fallen:
        print(message)
    if earlier and not fallen:
        print(f"no worse than the evaluation of {earlier[-1].get('at')}")
    return 1 if fallen else 0


@script
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Evaluate search on your own notes.")
    parser.add_argument("--limit", type=int, default=200, metavar="N",
                        help="at most N queries (200)")  # fmt: skip
    parser.add_argument("--notes", type=Path, metavar="DIR",
                        help="evaluate the notes in DIR instead of the index (copied and "
                        "ingested into a temporary store first)")  # fmt: skip
    parser.add_argument("--no-paraphrase", action="store_true",
                        help="use the queries as they are, even with LLM_URL set")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the history line as JSON")
    args = parser.parse_args(argv)
    if args.limit < 1:
        parser.error("--limit must be 1 or more")
    settings = get_settings()
    setup_logging(settings.LOG_LEVEL)
    if args.notes is None:  # the index: in this process, or through the server holding it
        notes = open_notes(settings)
        try:
            return run_eval(settings, notes.evaluate(args.limit, not args.no_paraphrase), args)
        finally:
            notes.close()
    if not args.notes.is_dir():
        return fail(f"--notes {args.notes} is not a folder", 2)
    with tempfile.TemporaryDirectory(prefix="kb-eval-") as tmp:
        shutil.copytree(args.notes, Path(tmp) / "notes", ignore=shutil.ignore_patterns(".*"))
        apart = registry.without_sources(settings, Path(tmp) / "notes").model_copy(update={
            "QDRANT_PATH": str(Path(tmp) / "qdrant"), "QDRANT_URL": "",
            "STATE_DIR": Path(tmp) / "state",
        })  # fmt: skip
        with (
            open_store(apart) as store,
            embed_client(apart) as client,
            embed_client(apart, code=True) as code,
        ):
            summary = ingest.run(apart, client, store)
            print(f"ingested {len(summary.ingested)} notes of {args.notes}", file=sys.stderr)
            # the history is the user's: STATE_DIR, not the temporary one
            kept = apart.model_copy(update={"STATE_DIR": settings.STATE_DIR})
            found = searcher(apart, store, client, code)
            return run_eval(kept, measure(kept, found, args.limit, not args.no_paraphrase), args)
