"""Search-quality techniques of issue 51, each a switch, before and after in one run.

    uv run bench/search_techniques.py [--cache DIR] [--only NAME] [--json]

Every development collection (bench/corpora.py) is ingested once; each query's dense ranking
and its keyword rankings (the query as hybrid search sends it, and each technique's rewrite of
it) are read from Qdrant once, as deep as hybrid search asks (kb.store.query.grouped_depth).
Hybrid search's fusion (the bonus formula, a note by its best cosine plus its best bonus:
bench.fusion_sweep.best_of_each) is then replayed offline with and without each
technique, scored as bench/retrieval.py scores (k=10, a file by its best chunk), beside plain
RRF through Qdrant (the reference). The replay without a technique is checked against hybrid
search through Qdrant: the run fails if they differ.

Techniques:

- `question words`: the keyword query without the words that open an English question or
  request before its subject (kb.embedding.keywords.question_scaffolding: stopwords and
  "way", "tips", "want", "show me", ... while they lead).
- `question words not counted`: the keyword ranking as before, but the keyword bonus scaled by
  the words left after the rewrite (a query whose language is told wrongly counts English
  question words as words: `how do I make dal with a tadka` counted 5, not 3).
- `sentence, keyword x0.5 from N words`: a query of N keyword words or more (stopwords aside) is
  a need or a question written out, not a lookup: its keyword bonus weighs half.
- `lead prior`: for a definition question ("what is X", "what's X", "define X") whose X is a
  note's title, that note's first chunk gets a bonus (LEAD_PRIOR added to its hybrid score).
- `note card`: one extra representation per note — its title, aliases, headings and lead
  paragraph as one text — scored by cosine and BM25 like a chunk (IDF over the cards, as
  Qdrant's Modifier.IDF), and fused like one: a note's score is the best of its chunks and its
  card. `card prior xW`: the card's score times W added to each of its note's chunks instead
  (`card cosine prior`: its cosine alone).
- `keyword feedback` (pseudo-relevance feedback): the keyword query plus the PRF_TERMS terms
  that weigh most in hybrid search's first PRF_DOCS chunks (tf there times log(N / df) over the
  candidates), each at PRF_WEIGHT; not for a lookup.

A technique is kept when its worst cell (a collection, or one kind of its queries) margin
against the best of keyword, semantic and plain RRF improves and no cell falls by more than
NOISE against hybrid search without it.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import STOPS, describe, embedder, format_table
from bench.corpora import Collection, dev_collections
from bench.fusion_sweep import DEPTH, MEASURED, best_of_each, grouped, indexed, single
from bench.fusion_sweep import Candidates as Base
from bench.retrieval import K, score
from bench.retrieval_gate import GATE_TOLERANCE
from kb.core.schema import KeywordVector
from kb.embedding.keywords import (
    STOPWORDS,
    document_vector,
    is_lookup,
    query_vector,
    query_words,
    term_id,
    tokenize,
)
from kb.embedding.languages import query_languages
from kb.search import lead
from kb.search.query import search
from kb.store.query import KEYWORD_HALF, KEYWORD_WEIGHT, LOOKUP_WEIGHT

NOISE = GATE_TOLERANCE  # a cell's drop that counts as noise (the gate's tolerance)
LEAD_PRIOR = 0.1  # added to the first chunk's hybrid score for a definition question
PRF_DOCS, PRF_TERMS, PRF_WEIGHT = 3, 10, 0.3  # keyword feedback: chunks read, terms added, weight
LEAD_CHARS = 400  # a note card's lead paragraph: its first chunk's first characters

Scored = list[tuple[str, str, float]]  # (chunk key, source, score), best first

# Words that only frame an English question or request ("is there a way to", "tips for", "show
# me how to") when they open it, beside the stop list's question words; the tails of `what's`,
# `don't`, `I'd` (the tokenizer splits at an apostrophe). Dropped from the start of the keyword
# query only: inside a query they may be its subject.
SCAFFOLDING = frozenset(
    """
    way ways best easiest simplest quickest tips tip want wanna need please tell show me
    possible let lets trying try know anyone someone help go going manage whats hows
    s t re ll ve m d
    """.split()  # noqa: SIM905
)


def question_scaffolding(text: str) -> str:
    """`text` without the words that open an English question or request before its subject:
    stopwords and SCAFFOLDING, as long as they lead (`is there a way to undo a rebase` ->
    `undo a rebase`); unchanged when nothing is left."""
    for match in re.finditer(r"\w+", unicodedata.normalize("NFKC", text)):
        low = match.group().lower()
        if low in STOPWORDS or low in SCAFFOLDING:
            continue
        return text[match.start() :] if match.start() else text
    return text


def rewritten_vector(text: str) -> KeywordVector:
    """kb.embedding.keywords.query_vector of `text` without its question scaffolding, its
    languages still told from the whole query."""
    languages = query_languages(text)
    stripped = question_scaffolding(text)
    ids = sorted({term_id(t) for t in tokenize(stripped, languages)})
    words = query_words(stripped, languages[0])
    return KeywordVector(ids, [1.0] * len(ids), lookup=is_lookup(stripped), words=words)


@dataclass
class Candidates(Base):
    rewritten: Scored = field(default_factory=list)  # keyword ranking of the rewritten query
    rewritten_terms: int = 0
    titles: dict[str, str] = field(default_factory=dict)  # source -> note title
    cards: dict[str, float] = field(default_factory=dict)  # source -> card's replayed score
    card_cosines: dict[str, float] = field(default_factory=dict)  # source -> card's cosine
    feedback: Scored = field(default_factory=list)  # keyword ranking of the expanded query


Fuse = Callable[[Candidates], dict[str, float]]


def shipped() -> Fuse:
    return best_of_each()


def question_words() -> Fuse:
    fuse = best_of_each()

    def run_(c: Candidates) -> dict[str, float]:
        return fuse(Candidates(c.query, c.rewritten_terms, c.dense, c.rewritten))

    return run_


def question_words_not_counted() -> Fuse:
    """The keyword ranking as before, the bonus scaled by the rewritten query's words."""
    fuse = best_of_each()

    def run_(c: Candidates) -> dict[str, float]:
        return fuse(Candidates(c.query, c.rewritten_terms, c.dense, c.keyword))

    return run_


def keyword_feedback() -> Fuse:
    fuse = best_of_each()

    def run_(c: Candidates) -> dict[str, float]:
        return fuse(Candidates(c.query, c.terms, c.dense, c.feedback))

    return run_


def sentence_weight(words: int, weight: float = 0.5) -> Fuse:
    """The keyword bonus at `weight` for a query of `words` keyword words or more (a need or a
    question written out as a sentence), as before for a shorter one."""
    short, long = best_of_each(), best_of_each(weight)
    return lambda c: (long if c.terms >= words else short)(c)


def lead_prior(weight: float = LEAD_PRIOR) -> Fuse:
    fuse = best_of_each()

    def run_(c: Candidates) -> dict[str, float]:
        out = fuse(c)
        subject = lead.subject(c.query.text)
        if subject is None:
            return out
        for source, title in c.titles.items():
            key = f"{source}#0"
            if key in out and lead.names(subject, title):
                out[key] += weight
        return out

    return run_


def note_card() -> Fuse:
    fuse = best_of_each()

    def run_(c: Candidates) -> dict[str, float]:
        out = fuse(c)
        for source, card in c.cards.items():
            out[f"{source}#card"] = card
        return out

    return run_


def card_prior(weight: float, dense_only: bool = False) -> Fuse:
    fuse = best_of_each()

    def run_(c: Candidates) -> dict[str, float]:
        out = fuse(c)
        prior = c.card_cosines if dense_only else c.cards
        return {key: v + weight * prior.get(key.rsplit("#", 1)[0], 0.0) for key, v in out.items()}

    return run_


TECHNIQUES: dict[str, Fuse] = {
    "hybrid (before)": shipped(),
    "a: question words": question_words(),
    "a: question words not counted": question_words_not_counted(),
    "a: sentence, keyword x0.5 from 5 words": sentence_weight(5),
    "a: sentence, keyword x0.5 from 7 words": sentence_weight(7),
    "b: lead prior": lead_prior(),
    "d: keyword feedback": keyword_feedback(),
    "c: note card": note_card(),
    "c: card prior x0.1": card_prior(0.1),
    "c: card prior x0.2": card_prior(0.2),
    "c: card prior x0.5": card_prior(0.5),
    "c: card cosine prior x0.2": card_prior(0.2, dense_only=True),
}


def replay(candidates: Sequence[Candidates], fuse: Fuse) -> dict[str, float]:
    values = []
    for c in candidates:
        fused = sorted(fuse(c).items(), key=lambda item: -item[1])  # stable: dense order on ties
        ranked = list(dict.fromkeys(key.rsplit("#", 1)[0] for key, _ in fused))[:K]
        values.append(score(ranked, c.query.relevant)["ndcg@10"])
    return grouped([c.query for c in candidates], values)


# --- note cards -----------------------------------------------------------------------------


def card_texts(store: Any) -> dict[str, str]:
    """source -> its note card: the title, aliases, the heading paths of its chunks, and the
    lead (the first chunk's first LEAD_CHARS characters)."""
    parts: dict[str, dict[str, Any]] = {}
    for _, payload in sorted(store.payloads(), key=lambda p: p[1].get("chunk_index") or 0):
        if payload.get("deleted"):
            continue
        card = parts.setdefault(
            str(payload.get("source")), {"head": [], "headings": [], "lead": ""}
        )
        if not card["head"]:
            card["head"] = [payload.get("title") or "", *(payload.get("aliases") or [])]
        for heading in payload.get("heading_path") or []:
            if heading not in card["headings"]:
                card["headings"].append(heading)
        if payload.get("chunk_index") == 0:
            card["lead"] = str(payload.get("text", ""))[:LEAD_CHARS]
    return {
        source: "\n".join([*p["head"], *p["headings"], p["lead"]]).strip()
        for source, p in parts.items()
    }


class Cards:
    """Note cards scored like chunks: cosine plus the bonus of their BM25 (IDF over the cards,
    as Qdrant's Modifier.IDF computes it)."""

    def __init__(self, texts: dict[str, str], vectors: Sequence[Sequence[float]]) -> None:
        self.sources = list(texts)
        self.docs = [
            dict(zip(v.indices, v.values, strict=True))
            for v in (document_vector(t) for t in texts.values())
        ]
        matrix = np.asarray(vectors, dtype=np.float64).reshape(len(self.sources), -1)
        self.vectors = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        df: Counter[int] = Counter(i for tf in self.docs for i in tf)
        n = len(self.docs)
        self.idf = {i: math.log(1 + (n - k + 0.5) / (k + 0.5)) for i, k in df.items()}

    def scores(
        self, query: str, dense: Sequence[float]
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Each card's hybrid score and its cosine."""
        vector = query_vector(query)
        terms = vector.words or len(vector.indices)
        weight = LOOKUP_WEIGHT if vector.lookup else KEYWORD_WEIGHT
        q = np.asarray(dense, dtype=np.float64)
        cosines = self.vectors @ (q / max(float(np.linalg.norm(q)), 1e-12))
        out, near = {}, {}
        for source, tf, cosine in zip(self.sources, self.docs, cosines.tolist(), strict=True):
            bm25 = sum(tf[i] * self.idf[i] for i in vector.indices if i in tf)
            out[source] = cosine + weight * bm25 / (bm25 + KEYWORD_HALF * max(terms, 1))
            near[source] = cosine
        return out, near


def feedback_vector(
    keyword: KeywordVector, first: Sequence[str], texts: dict[str, str]
) -> KeywordVector:
    """`keyword` plus the PRF_TERMS terms that weigh most in the chunks `first` (the hybrid
    ranking's best), by term frequency there times log(N / df) over the candidates' `texts`,
    each at PRF_WEIGHT; the bonus's scale (words) stays the query's."""
    n = len(texts)
    df: Counter[str] = Counter(t for text in texts.values() for t in set(tokenize(text)))
    tf: Counter[str] = Counter(t for key in first if key in texts for t in tokenize(texts[key]))
    own = set(keyword.indices)
    chosen = sorted(
        ((count * math.log(n / df[t]), t) for t, count in tf.items()
         if term_id(t) not in own and df[t] < n),
        reverse=True,
    )[:PRF_TERMS]  # fmt: skip
    weights = dict.fromkeys(keyword.indices, 1.0)
    for _, term in chosen:
        weights[term_id(term)] = weights.get(term_id(term), 0.0) + PRF_WEIGHT
    ids = sorted(weights)
    words = keyword.words or len(keyword.indices)
    return KeywordVector(ids, [weights[i] for i in ids], lookup=keyword.lookup, words=words)


# --- candidates -------------------------------------------------------------------------------


def ranked(hits: Sequence[Any]) -> Scored:
    return [(f"{h.source}#{h.chunk_index}", str(h.source), h.score) for h in hits]


def collect(
    collection: Collection, url: str, cache: Path | None, cards: bool
) -> tuple[list[Candidates], dict[str, dict[str, float]]]:
    """Each query's rankings, and the nDCG@10 per group of hybrid search and plain RRF through
    Qdrant."""
    with indexed(collection, url, cache) as ix:
        target, client, queries, vectors = ix.store, ix.client, ix.queries, ix.vectors
        texts = card_texts(target) if cards else {}
        scorer = Cards(texts, client.embed_documents(list(texts.values()))) if texts else None
        found: list[Candidates] = []
        real: dict[str, list[float]] = {name: [] for name in MEASURED}
        for q, dense in zip(queries, vectors, strict=True):
            keyword = query_vector(q.text)
            rewritten = rewritten_vector(q.text)
            dense_hits = target.query(DEPTH, dense=dense)
            c = Candidates(
                q,
                len(keyword.indices) if not keyword.words else keyword.words,
                ranked(dense_hits),
                ranked(target.query(DEPTH, keyword=keyword)) if keyword.indices else [],
                ranked(target.query(DEPTH, keyword=rewritten)) if rewritten.indices else [],
                rewritten.words or len(rewritten.indices),
            )
            c.titles = {str(h.source): h.title or "" for h in dense_hits}
            if keyword.indices and not keyword.lookup:
                chunk_texts = {f"{h.source}#{h.chunk_index}": h.text for h in dense_hits}
                for h in target.query(DEPTH, keyword=keyword):
                    chunk_texts[f"{h.source}#{h.chunk_index}"] = h.text
                first = sorted(best_of_each()(c).items(), key=lambda item: -item[1])[:PRF_DOCS]
                expanded = feedback_vector(keyword, [k for k, _ in first], chunk_texts)
                c.feedback = ranked(target.query(DEPTH, keyword=expanded))
            else:
                c.feedback = c.keyword
            if scorer is not None:
                c.cards, c.card_cosines = scorer.scores(q.text, dense)
            found.append(c)
            for name, fusion in MEASURED.items():
                hits = search(target, client, q.text, K, per_note=1, fusion=fusion)
                ranking = list(dict.fromkeys(str(h.source) for h in hits))
                real[name].append(score(ranking, q.relevant)["ndcg@10"])
    return found, {name: grouped(queries, values) for name, values in real.items()}


def verdicts(
    table: dict[str, dict[str, dict[str, float]]], names: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per technique of `names` (hybrid search without one first): its worst margin against the
    best of keyword, semantic and plain RRF, its largest drop against hybrid search without it,
    its mean, and whether it is kept (worst margin up, no cell down by more than NOISE)."""
    before = table["hybrid (before)"]
    refs = ("keyword", "semantic", "rrf k=60 (Qdrant)")
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        cells = [(c, g, v) for c, groups in table[name].items() for g, v in groups.items()]
        worst = min((v - max(table[r][c][g] for r in refs), f"{c}/{g}") for c, g, v in cells)
        drop = min((v - before[c][g], f"{c}/{g}") for c, g, v in cells)
        out[name] = {
            "worst": round(worst[0], 4),
            "worst_cell": worst[1],
            "largest_drop": round(drop[0], 4),
            "drop_cell": drop[1],
            "mean": round(statistics.fmean(v for *_, v in cells), 4),
        }
    base = out["hybrid (before)"]["worst"]
    for name, v in out.items():
        v["kept"] = name != "hybrid (before)" and v["worst"] > base and v["largest_drop"] >= -NOISE
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, metavar="DIR", help="embedding cache kept")
    parser.add_argument(
        "--only",
        action="append",
        choices=[c.name for c in dev_collections()],
        help="this development collection only (repeatable; default: all of them)",
    )
    parser.add_argument("--no-cards", action="store_true", help="leave the note card out")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    techniques = {n: f for n, f in TECHNIQUES.items() if not (args.no_cards and "card" in n)}
    try:
        collected: dict[str, list[Candidates]] = {}
        real: dict[str, dict[str, dict[str, float]]] = {}
        with embedder() as url:
            for collection in dev_collections():
                if args.only and collection.name not in args.only:
                    continue
                print(f"--- {collection.name}", file=sys.stderr)
                collected[collection.name], real[collection.name] = collect(
                    collection, url, args.cache, not args.no_cards
                )
    except STOPS as exc:
        print(f"error: {describe(exc)}", file=sys.stderr)
        return 1
    table = {
        name: {c: replay(found, fuse) for c, found in collected.items()}
        for name, fuse in techniques.items()
    }
    for name in MEASURED:
        table[name] = {c: real[c][name] for c in collected}
    for name in ("keyword", "semantic"):  # replayed, as bench/fusion_sweep.py's references
        table[name] = {c: replay(found, single(name)) for c, found in collected.items()}
    triggered = sum(lead.subject(c.query.text) is not None for f in collected.values() for c in f)
    changed = sum(  # a keyword query the rewrite changes (leading stopwords were dropped before)
        rewritten_vector(c.query.text).indices != query_vector(c.query.text).indices
        for f in collected.values()
        for c in f
    )
    headers = ["collection / kind", "queries", "rrf", *techniques]
    rows = []
    for c, groups in table["hybrid (before)"].items():
        counts = Counter(q.query.kind for q in collected[c])
        for g in groups:
            n = len(collected[c]) if g == "all" else counts[g]
            label = c if g == "all" else f"  {g}"
            rows.append(
                [label, n, table["rrf k=60 (Qdrant)"][c][g], *(table[t][c][g] for t in techniques)]
            )
    print(f"nDCG@10, k={K}, one result per note (replayed hybrid fusion, plain RRF via Qdrant):")
    print(format_table(headers, rows))
    judged = verdicts(table, list(techniques))
    print(
        f"\nqueries the question-word rewrite changes: {changed}; definition questions: {triggered}"
    )
    print(
        f"worst margin against keyword, semantic, plain RRF; drop against before (noise {NOISE}):"
    )
    print(
        format_table(
            ["technique", "worst margin", "in", "largest drop", "in", "mean", "kept"],
            [
                [n, f"{v['worst']:+.4f}", v["worst_cell"], f"{v['largest_drop']:+.4f}",
                 v["drop_cell"], v["mean"], "yes" if v["kept"] else "no"]
                for n, v in judged.items()
            ],
        )
    )  # fmt: skip
    hybrid = table["hybrid search"]
    gap = max(
        abs(v - table["hybrid (before)"][c][g])
        for c, groups in hybrid.items()
        for g, v in groups.items()
    )
    print(f"replay vs hybrid search through Qdrant: largest difference {gap:.4f}; "
          f"wall time {time.perf_counter() - started:.0f}s")  # fmt: skip
    if args.json:
        print(json.dumps({"verdicts": judged, "ndcg@10": table}))
    return 0 if math.isclose(gap, 0.0, abs_tol=1e-3) else 1


if __name__ == "__main__":
    raise SystemExit(main())
