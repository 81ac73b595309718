"""How query.py prints: a result (its source, lines, score, preview and --explain's line), the
related notes, the cited answer."""

from __future__ import annotations

import argparse
import json
import sys

from kb.content.chunking import PATH_SEPARATOR
from kb.core.settings import Settings
from kb.search.query import Hit
from kb.search.related import Related
from kb.search.rerank import Reranked

PREVIEW_CHARS = 200


def clock(seconds: int) -> str:
    """612 -> "10:12", 3723 -> "1:02:03"."""
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def format_hit(rank: int, hit: Hit) -> str:
    where = hit.source or "(unknown source)"
    if hit.kind == "video":  # a saved video: its link, length and channel
        length = clock(hit.duration_s) if hit.duration_s is not None else "?"
        where += f"  {hit.url}  ({length}, {hit.channel or 'unknown channel'})"
    elif hit.line_start is not None:
        where += f":{hit.line_start}-{hit.line_end}"
    section = f"  ({PATH_SEPARATOR.join(hit.heading_path)})" if hit.heading_path else ""
    shown = ("", PATH_SEPARATOR.join(hit.heading_path))  # a heading path is printed below
    if hit.locator not in shown and not hit.locator.startswith("L "):  # lines: printed above
        where += f"  {hit.locator}"  # p. 3, row 17, cell 4 [code], Methods, ¶ 4
    tags = f"  [{', '.join(hit.tags)}]" if hit.tags else ""
    text = " ".join(hit.text.split())
    preview = text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
    n = hit.hidden_chars_removed
    hidden = f"  !{n} hidden characters removed" if n else ""
    sure = f"  (confidence {hit.confidence:.2f})" if hit.confidence is not None else ""
    stale = "  !stale: the file changed since it was indexed" if hit.stale else ""
    line = f"{rank}. {hit.score:.3f}  {where}{tags}{section}{sure}{hidden}{stale}\n   {preview}"
    return line + (f"\n   {explained(hit)}" if hit.explain is not None else "")


def explained(hit: Hit) -> str:
    """--explain's line: the result's place in each ranking, the filters and its indexing."""
    why = hit.explain
    assert why is not None

    def place(name: str, rank: int | None, score: float | None) -> str:
        return f"{name} #{rank} {score:.3f}" if rank is not None and score is not None else (
            f"{name} not in top"
        )  # fmt: skip

    parts = [
        "semantic: not embedded yet (found by its words)"
        if why.unembedded
        else place("semantic", why.semantic_rank, why.semantic_score),
        place("keyword", why.keyword_rank, why.keyword_score),
        f"first stage #{why.fused_rank} {why.first_score:.3f}",
    ]
    if why.semantic_down:
        parts.append(f"semantic weighed down: {why.semantic_down}")
    if why.rerank_rank is not None and why.rerank_score is not None:
        parts.append(f"rerank #{why.rerank_rank} {why.rerank_score:.3f} (weight "
                     f"{why.rerank_weight:g}, blend {why.blended:.5f})")  # fmt: skip
    if why.found_by:
        parts.append("found by " + ", ".join(why.found_by))
    if why.filters:
        parts.append("filters " + ", ".join(f"{k}={v}" for k, v in why.filters.items()))
    parts.append(f"{why.collection}, indexed {why.indexed_at or '?'}")
    return "why: " + " · ".join(parts)


def print_results(found: Reranked, *, as_json: bool) -> int:
    """A search's results, one per line (or as JSON), and the last line when none matches well;
    the search's note (e.g. why it is not reranked) on stderr."""
    hits = found.hits
    if found.note:
        print(f"note: {found.note}", file=sys.stderr)
    if as_json:
        body = {"results": [hit.to_dict() for hit in hits], "no_good_match": found.no_good_match}
        print(json.dumps(body, ensure_ascii=False))
        return 0
    if not hits:
        print("no results")
    else:
        print("\n".join(format_hit(rank, hit) for rank, hit in enumerate(hits, 1)))
    if hits and found.no_good_match:
        print("no good match: none of these looks relevant; your notes may not cover this")
    return 0


WHY = {"backlink": "links here", "link": "linked from it", "both": "linked both ways"}


def format_related(found: Related) -> str:
    """The related notes, each with why: `links here`, `linked from it`, `similar 0.71`."""
    aliases = f"  (also: {', '.join(found.aliases)})" if found.aliases else ""
    lines = [
        f"{found.source}: {found.title or ''}{aliases}",
        f"  {found.links_in} notes link here, it links to {found.links_out}",
    ]
    for note in found.notes:
        why = WHY.get(note.why) or f"similar {note.score:.3f}"
        lines.append(f"  {why:17} {note.source}  {note.title or ''}".rstrip())
    lines += [f"  unresolved: [[{target}]]" for target in found.unresolved]
    if found.hidden_chars_removed:
        lines.append(f"  !{found.hidden_chars_removed} hidden characters removed")
    return "\n".join(lines)


def print_answer(settings: Settings, args: argparse.Namespace, hits: list[Hit]) -> int:
    """The cited answer LLM_URL writes from `hits` (citations only ever name these hits)."""
    from kb.search import (
        answer as kb_answer,  # only --answer needs it: a plain search starts faster
    )

    raw = "Nothing in the notes matches this question."
    if hits:
        raw = kb_answer.chat(
            settings.LLM_URL,
            args.query,
            hits,
            model=settings.LLM_MODEL,
            api_key=settings.LLM_API_KEY,
            timeout=settings.LLM_TIMEOUT,
        )
    cited = kb_answer.cite(raw, hits)
    labels = [kb_answer.label(h) for h in cited.cited]
    if args.json:
        body = {"answer": cited.text, "citations": labels, "dropped_citations": cited.dropped}
        print(json.dumps(body, ensure_ascii=False))
        return 0
    print(cited.text)
    if labels:
        print("\nsources: " + ", ".join(labels))
    if cited.dropped:
        print("dropped citations (not among the retrieved passages): " + ", ".join(cited.dropped))
    return 0
