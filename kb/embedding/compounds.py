"""German compounds split into their parts, so `Parametertypen` meets `Datentypen` by `Typen` and
`Verarbeitungszeit` meets `Zeit`: kb.embedding.languages indexes a compound's parts beside the
whole word, on the document side and the query side, as Lucene's decompounding filters do.

Frequency-based splitting (Koehn and Knight, "Empirical Methods for Compound Splitting", 2003)
over wordfreq's German word list (`large`, 630,000 words with their frequencies, loaded on the
first German word of at least MIN_COMPOUND letters): a word is split when it is not itself a
common word (nor one of its inflected forms), into the fewest parts that are each a known word
of at least MIN_PART letters, a linking `s`, `es`, `n`, `en`, `e`, `er` or `ens` after a part
left out (`Verarbeitungs|zeit` -> `verarbeitung`, `zeit`); of splits with as many parts, the
one whose parts are the most frequent (geometric mean). Chosen by measurement
(bench/README.md, "Notes in other languages"): compound-split, the n-gram splitter, took 15 s
and 3.4 GB to import its model.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache

MIN_COMPOUND = 8  # letters: a shorter word is left whole
MIN_PART = 4  # letters of each part
# A word this frequent (or an inflected form of one: `Abhängigkeiten`) is a word of its own:
# `Beispiel` is not `bei` + `Spiel`, nor `Parameter` `Para` + `Meter`. 1e-6 is a Zipf value of 3.
COMMON = 1e-6
# The least frequency a part needs: rarer entries of the list are noise (`ionen`, `ttes`).
KNOWN = 1e-7
# What German puts between the parts of a compound (Fugenelemente), and after a word's stem.
LINKS = ("s", "es", "n", "en", "e", "er", "ens")
ENDINGS = ("", "e", "en", "n", "s", "es", "er", "ern")


@cache
def _frequencies() -> dict[str, float]:
    from wordfreq import get_frequency_dict

    return dict(get_frequency_dict("de", "large"))


def _frequency(word: str) -> float:
    return _frequencies().get(word, 0.0)


def _common(word: str) -> bool:
    return any(
        word.endswith(ending) and _frequency(word[: len(word) - len(ending)]) >= COMMON
        for ending in ENDINGS
    )


Split = tuple[int, float, tuple[str, ...]]  # parts, mean log frequency, the parts


def _splits(word: str) -> list[Split]:
    """Every split of `word` in two or more known parts, the head split further."""
    options: list[Split] = []
    for cut in range(MIN_PART, len(word) - MIN_PART + 1):
        head, tail = word[:cut], word[cut:]
        if _frequency(tail) < KNOWN:
            continue
        for link in ("", *LINKS):
            if not head.endswith(link) or len(head) - len(link) < MIN_PART:
                continue
            best = _best(head[: len(head) - len(link)])
            if best is not None:
                n, mean, parts = best
                total = mean * n + math.log(_frequency(tail))
                options.append((n + 1, total / (n + 1), (*parts, tail)))
    return options


def _choose(options: list[Split]) -> Split | None:
    """The fewest parts, then the most frequent."""
    return max(options, key=lambda o: (-o[0], o[1])) if options else None


@lru_cache(maxsize=65536)
def _best(word: str) -> Split | None:
    """`word` as one part when it is a known word, else its best split; None when it has none."""
    if _frequency(word) >= KNOWN:
        return (1, math.log(_frequency(word)), (word,))
    return _choose(_splits(word))


def german_parts(word: str) -> tuple[str, ...]:
    """The parts of the lower-cased German `word` when it is a compound (`verarbeitungszeit` ->
    `verarbeitung`, `zeit`), else ()."""
    if len(word) < MIN_COMPOUND or not word.isalpha() or _common(word):
        return ()
    best = _choose(_splits(word))
    return best[2] if best is not None else ()
