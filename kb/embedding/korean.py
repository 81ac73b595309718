"""Korean words as their content morphemes, for keyword search: `추가하기` is `추가`, `바꿔서`
and `바꾸는` are both `바꾸`, `벌통에서` is `벌통` (kb.embedding.keywords indexes them in place
of character pairs).

A Korean word (eojeol) is a stem with particles and endings glued to it; character pairs of it
(what Lucene's CJK analyser indexes) include the endings, and `하기` or `에서` on nearly every
page made every longer page a match. Kiwi (kiwipiepy, Apache-2.0, with kiwipiepy-model) tags each
morpheme; nouns, roots, verb and adjective stems, adverbs and Hanja are kept, particles, endings,
suffixes, copulas, auxiliaries and determiners left out. Loaded on the first Korean word (1 to
2.6 s and 340 MB without the multi-word and typo dictionaries, which a word analysed alone does
not use: the same morphemes on the dev set); measured against python-mecab-ko and character
pairs in bench/README.md ("Notes in other languages").
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

# Kiwi's tags (Sejong's) of what a word is about: general and proper nouns, numerals, roots,
# verb and adjective stems, general adverbs, Hanja. A tag may carry `-I`/`-R` (irregular stems).
CONTENT_TAGS = frozenset({"NNG", "NNP", "NR", "XR", "VV", "VA", "MAG", "SH"})


@cache
def _kiwi() -> Any:
    from kiwipiepy import Kiwi

    return Kiwi(load_multi_dict=False, load_typo_dict=False)


@lru_cache(maxsize=65536)
def morphemes(word: str) -> tuple[str, ...]:
    """The content morphemes of the Korean `word` (a run of Hangul), in order; () when it is
    all particles and endings."""
    return tuple(
        token.form
        for token in _kiwi().tokenize(word)
        if str(token.tag).split("-")[0] in CONTENT_TAGS
    )
