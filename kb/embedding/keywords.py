"""Keyword (BM25-style) vectors for hybrid search: stored in Qdrant as sparse vectors.

Documents get BM25 term-frequency saturation weights; queries get 1.0 per distinct term. The IDF
half of BM25 is left to Qdrant's `Modifier.IDF` on the sparse vector, so document frequencies stay
right as notes are added, replaced and deleted, with no corpus statistics kept here.

Tokens: words are case-folded and Snowball-stemmed in the text's language (snowballstemmer, the
maintained port Sphinx uses; it switches to the C PyStemmer when installed), a stored chunk in the
language kb.embedding.languages detects for it (or its note's `lang`), a query in the language it
is written in and in English. Code identifiers (`snake_case`,
`dotted.names`, `path/to/file.py`, `camelCase`) are kept whole *and* split into their parts, so an
exact lookup and a partial one both match; a compound part of a longer one is kept whole too
(`enqueue_many` in `job.enqueue_many`, `main.py` in `src/app/main.py`), so a method or file named
alone matches where it is written qualified; a plural acronym is its singular (`APIs` is `API`).
Numbers are kept. A run of Chinese, Japanese or Korean becomes its words
(kb.embedding.cjk: `送られた` -> `送る`, `벌통에서` -> `벌통`), so a word searched alone or in
another form matches, and particles and endings match nothing. A German compound is indexed
whole and by its parts (kb.embedding.compounds).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from kb.core.schema import KeywordVector
from kb.embedding import cjk
from kb.embedding.languages import (
    ANALYSIS_VERSION,
    CJK_LANGUAGES,
    ENGLISH,
    QUERY_LEAST,
    detect,
    likeliest,
    query_languages,
    stems,
    stopwords,
    word_language,
)

# BM25 document-side parameters. AVG_LEN stands in for the corpus mean chunk length (in tokens):
# a fixed value keeps vectors independent of the rest of the corpus. Chunks are <= 1500 chars,
# most much shorter (a heading section each); Cranfield's chunks average 90 tokens, and 100
# scored nDCG@10 0.363 there against 0.354 for 200.
K1 = 1.2
B = 0.75
AVG_LEN = 100.0

# Bump when tokens or weights change: it is in every note's fingerprint, so a folder's notes are
# re-indexed by its next ingest and the inbox's by the next --rebuild (embeddings from the cache).
TOKENIZER_VERSION = 3 + ANALYSIS_VERSION

_CJK = "\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(
    rf"[{_CJK}]+"  # a run of CJK characters
    rf"|[^\W{_CJK}]+(?:[._/\-:#@+][^\W{_CJK}]+)*"  # a word, or parts joined by . _ / - : # @ +
)
# A token splits in three levels: path-like separators, then dots, then the separators and case
# changes inside one name. Each compound piece of a level is a term of its own.
_PATH_SEP = re.compile(r"[/:#@+]+")
_DOT_SEP = re.compile(r"\.+")
_NAME_SEP = re.compile(r"[_\-]+")
# A capital run followed by a plural `s` is one word (`URLs`, `APIs`, `UUIDs` are `url`, `api`,
# `uuid`, not `ur` + `ls`): the `s` does not start a new word as the `e` of `HTTPServer` does.
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])(?![A-Z]s(?![a-z]))")
_PLURAL_ACRONYM = re.compile(r"^[A-Z]{2,}s$")
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")
_HANGUL_WORD = re.compile(r"^[\uac00-\ud7af]+$")

# Snowball's English stop list (the stemmer's own project) plus modal verbs. With IDF weighting
# a stopword still adds noise: question words ("what", "how", "which") are rare in notes, so
# they get a high IDF and match chunks by accident. Measured on Cranfield: keyword nDCG@10 0.365
# vs 0.359 with Lucene's 33 words. An all-caps token is kept (IT, US, WHO, CAN bus: acronyms).
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself may me might more most must my myself no nor not of off on once only or other ought
    our ours ourselves out over own same shall she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours
    yourself yourselves also
    """.split()  # noqa: SIM905 (one word per line as a list would run to 130 lines)
)


def _stopword(low: str, language: str) -> bool:
    return low in (STOPWORDS if language == ENGLISH else stopwords(language))


def uncovered(text: str, covered: frozenset[str] | None) -> str | None:
    """The language of the query `text` when the embedding model covers none it may be in
    (`covered`: kb.embedding.languages.model_languages, None for every language), else None.

    A query is in a covered language when it is too short to tell (`detect` says English then),
    when `detect` names a covered one, when the detector gives a covered one at least
    QUERY_LEAST (the likelihood at which a query is analysed in a language too), or when it holds
    more stop words of a covered language than of the detected one: function words are the
    surest sign of a short text's language, and the detector reads `how do I make dal with a
    tadka` as Italian (five English stop words, three Italian ones)."""
    if covered is None:
        return None
    found = detect(text)
    if found in covered:
        return None
    if found in CJK_LANGUAGES:  # told by its script
        return found
    if any(code in covered and p >= QUERY_LEAST for code, p in likeliest(text)):
        return None
    words = [m.group().lower() for m in _TOKEN.finditer(unicodedata.normalize("NFKC", text))]
    own = sum(_stopword(w, found) for w in words)
    if any(sum(_stopword(w, code) for w in words) > own for code in covered):
        return None
    return found


def _word_terms(word: str, languages: Sequence[str], parts: bool = True) -> list[str]:
    if _PLURAL_ACRONYM.match(word):
        word = word[:-1]  # `APIs` is `API` in every language (German's stemmer keeps `apis`)
    low = word.lower()
    if low.isdigit() or not low.isalpha():
        return [low]  # numbers and mixed tokens (v2, 3d, utf8) match exactly
    analysed = list(dict.fromkeys(word_language(word, lang) for lang in languages))
    if any(_stopword(low, lang) for lang in analysed) and not (len(word) > 1 and word.isupper()):
        return []  # a stopword in any language the query may be in (an all-caps one: acronym)
    terms: list[str] = []
    for language in analysed:
        terms.extend(t for t in stems(low, language, parts) if t not in terms)
    return terms


def tokenize(
    text: str, languages: Sequence[str] = (ENGLISH,), parts: bool = True, stored: bool = False
) -> list[str]:
    """Text -> index terms (with repeats, in order), its words analysed in each of `languages`
    (one for a stored chunk; a query's languages for a query); a German compound's parts too
    unless `parts` is False; a Chinese word's shorter words too when `stored` (kb.embedding.cjk)."""
    terms: list[str] = []
    for match in _TOKEN.finditer(unicodedata.normalize("NFKC", text)):
        tok = match.group()
        if _CJK_RUN.match(tok):
            terms.extend(cjk.words(tok, languages, stored))
            continue
        words, compounds = _split(tok)
        terms.extend(compounds)  # the whole identifier and its compound pieces, for lookups
        for w in words:
            terms.extend(_word_terms(w, languages, parts))
    return terms


def _words(piece: str) -> list[str]:
    """Every word of `piece`, split at every level."""
    return [
        w
        for path in _PATH_SEP.split(piece)
        for dotted in _DOT_SEP.split(path)
        for name in _NAME_SEP.split(dotted)
        for w in _CAMEL.split(name)
        if w
    ]


def _split(tok: str) -> tuple[list[str], list[str]]:
    """A token's words, and its compound pieces (of more than one word) lower-cased, the whole
    token first: `job.enqueue_many` -> [job, enqueue, many], [job.enqueue_many, enqueue_many]."""
    paths = [p for p in _PATH_SEP.split(tok) if p]
    dotted = [d for p in paths for d in _DOT_SEP.split(p) if d]
    compounds = dict.fromkeys(x.lower() for x in (tok, *paths, *dotted) if len(_words(x)) > 1)
    return _words(tok), list(compounds)


def term_id(term: str) -> int:
    """Stable 32-bit id of a term (Qdrant sparse indices are u32); same in every process."""
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=4).digest(), "little")


def _to_vector(weights: dict[int, float]) -> KeywordVector:
    ids = sorted(weights)
    return KeywordVector(ids, [weights[i] for i in ids])


def document_vector(text: str, language: str = ENGLISH) -> KeywordVector:
    """BM25 term-frequency part for a stored chunk written in `language`."""
    terms = tokenize(text, (language,), stored=True)
    norm = K1 * (1 - B + B * len(terms) / AVG_LEN)
    weights: dict[int, float] = {}
    for term, tf in Counter(terms).items():
        tid = term_id(term)
        # a 32-bit hash collision merges two terms; add rather than overwrite
        weights[tid] = weights.get(tid, 0.0) + tf * (K1 + 1) / (tf + norm)
    return _to_vector(weights)


def query_vector(text: str) -> KeywordVector:
    """Each distinct query term once; Qdrant multiplies by its IDF. Marked `lookup` when the
    query is one (`is_lookup`)."""
    languages = query_languages(text)
    vector = _to_vector({term_id(t): 1.0 for t in tokenize(text, languages)})
    return replace(vector, lookup=is_lookup(text), words=query_words(text, languages[0]))


def query_words(text: str, language: str = ENGLISH) -> int:
    """How many words a query has, for the keyword bonus's scale (kb.store.query.fusion): its
    distinct terms in `language`, not the forms each word is searched in (a CJK run's words, a
    German compound one word, not one per part)."""
    return len(set(tokenize(text, (language,), parts=False)))


# What marks a word as an identifier, a code or an acronym rather than a word of prose: one of
# these joiners, a digit (below), or a capital after the first letter (`_identifier`). Not `-`:
# English joins words with it.
_IDENTIFIER_MARK = re.compile(r"[_./:#@+\d]")


def _identifier(word: str) -> bool:
    # no regex for the capital: `.\S*[A-Z]` backtracks over a long word in quadratic time
    return bool(_IDENTIFIER_MARK.search(word)) or any(ch.isupper() for ch in word[1:])


def is_lookup(text: str) -> bool:
    """True when `text` is made only of identifiers, codes, numbers and acronyms
    (`TaxRuleChosen`, `INC-1187`, `WCAG AA`, `job.enqueue_many`), stopwords aside: nothing an
    embedding catches the meaning of, so only a note naming them answers."""
    words = [
        m.group()
        for m in _TOKEN.finditer(unicodedata.normalize("NFKC", text))
        if m.group().lower() not in STOPWORDS or m.group().isupper()
    ]
    return bool(words) and all(_identifier(w) for w in words)
