"""Keyword (BM25-style) sparse vectors for hybrid search.

Documents get BM25 term-frequency saturation weights; queries get 1.0 per distinct term. The IDF
half of BM25 is left to Qdrant's `Modifier.IDF` on the sparse vector, so document frequencies stay
right as notes are added, replaced and deleted, with no corpus statistics kept here.

Tokens: words are case-folded and Snowball-stemmed (snowballstemmer, the maintained port Sphinx
uses; it switches to the C PyStemmer when installed). Code identifiers (`snake_case`,
`dotted.names`, `path/to/file.py`, `camelCase`) are kept whole *and* split into their parts, so an
exact lookup and a partial one both match. Numbers are kept. CJK runs become overlapping character
bigrams (as Lucene's CJK analyzer does), so Chinese/Japanese/Korean text never collapses into one
token per sentence.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

# BM25 document-side parameters. AVG_LEN stands in for the corpus mean chunk length (in tokens):
# a fixed value keeps vectors independent of the rest of the corpus (chunks are <= 1500 chars).
K1 = 1.2
B = 0.75
AVG_LEN = 200.0

_CJK = "\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(
    rf"[{_CJK}]+"  # a run of CJK characters
    rf"|[^\W{_CJK}]+(?:[._/\-:#@+][^\W{_CJK}]+)*"  # a word, or parts joined by . _ / - : # @ +
)
_PART_SEP = re.compile(r"[._/\-:#@+]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")

# Lucene's classic English stop set: too common to help a keyword match, and IDF alone still
# lets them add noise to short queries.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)

_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


def _word_terms(word: str) -> list[str]:
    low = word.lower()
    if low in STOPWORDS:
        return []
    if low.isdigit() or not low.isalpha():
        return [low]  # numbers and mixed tokens (v2, 3d, utf8) match exactly
    return [_stem(low)]


def tokenize(text: str) -> list[str]:
    """Text -> index terms (with repeats, in order)."""
    terms: list[str] = []
    for match in _TOKEN.finditer(unicodedata.normalize("NFKC", text)):
        tok = match.group()
        if _CJK_RUN.match(tok):
            terms.extend([tok] if len(tok) == 1 else [tok[i : i + 2] for i in range(len(tok) - 1)])
            continue
        parts = [p for p in _PART_SEP.split(tok) if p]
        words = [w for p in parts for w in _CAMEL.split(p) if w]
        if len(words) > 1:
            terms.append(tok.lower())  # the whole identifier, for exact lookups
        for w in words:
            terms.extend(_word_terms(w))
    return terms


def term_id(term: str) -> int:
    """Stable 32-bit id of a term (Qdrant sparse indices are u32); same in every process."""
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=4).digest(), "little")


@dataclass(frozen=True)
class Sparse:
    indices: list[int]
    values: list[float]


def _to_sparse(weights: dict[int, float]) -> Sparse:
    ids = sorted(weights)
    return Sparse(ids, [weights[i] for i in ids])


def document_vector(text: str) -> Sparse:
    """BM25 term-frequency part for a stored chunk."""
    terms = tokenize(text)
    norm = K1 * (1 - B + B * len(terms) / AVG_LEN)
    weights: dict[int, float] = {}
    for term, tf in Counter(terms).items():
        tid = term_id(term)
        # a 32-bit hash collision merges two terms; add rather than overwrite
        weights[tid] = weights.get(tid, 0.0) + tf * (K1 + 1) / (tf + norm)
    return _to_sparse(weights)


def query_vector(text: str) -> Sparse:
    """Each distinct query term once; Qdrant multiplies by its IDF."""
    return _to_sparse({term_id(t): 1.0 for t in tokenize(text)})
