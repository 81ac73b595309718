"""Chinese, Japanese and Korean text as words, for keyword search (kb.embedding.keywords indexes
them): none of the three puts spaces between its words, and Korean glues particles and endings
to them.

- **Japanese**: morphemes by IPADIC (lindera-python-ipadic, MIT: lindera's Rust MeCab-style
  tokenizer with the dictionary built in), each as its dictionary form (`送られた` is `送る`),
  particles, auxiliary verbs and symbols left out; a long katakana word without its final `ー`.
- **Chinese**: words by jieba's dictionary and HMM (rjieba, MIT: the Rust jieba-rs); a stored
  passage by each word's shorter words too.
- **Korean**: a word (eojeol) as its content morphemes by Kiwi (kiwipiepy with kiwipiepy-model,
  Apache-2.0): `추가하기` is `추가`, `바꿔서` and `바꾸는` are both `바꾸`, `벌통에서` is `벌통`;
  nouns, roots, verb and adjective stems, adverbs and Hanja are kept, particles, endings,
  suffixes, copulas, auxiliaries and determiners left out.

Character pairs (Lucene's CJK analyser), which all three were once, match particles, endings
and pairs across two words (`和|尚未` has `和尚`); each analyser was chosen by keyword nDCG@10 on
the multilingual dev set, install size and load time (bench/README.md, "Notes in other
languages"). Each loads on its language's first run: Japanese 0.14 s and 97 MB, Chinese 0.09 s
and 36 MB, Korean 1 to 2.6 s and 340 MB (without Kiwi's multi-word and typo dictionaries, which
a word analysed alone does not use). Korean words are cached (short, and repeated on every
page); Japanese and Chinese runs, up to a passage long and mostly unique, are not: both analyse
over a million characters a second.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import Any

_HANGUL_WORD = re.compile(r"^[\uac00-\ud7af]+$")
_KANA = re.compile(r"[\u3040-\u30ff]")
_KATAKANA_WORD = re.compile(r"^[\u30a1-\u30fa\u30fc]+$")
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")

# Kiwi's tags (Sejong's) of what a word is about: general and proper nouns, numerals, roots,
# verb and adjective stems, general adverbs, Hanja. A tag may carry `-I`/`-R` (irregular stems).
KOREAN_CONTENT = frozenset({"NNG", "NNP", "NR", "XR", "VV", "VA", "MAG", "SH"})
# IPADIC's parts of speech that carry no meaning of their own: particles, auxiliary verbs,
# symbols. Leaving them out scored 0.923 against 0.911 with every morpheme (bench/README.md).
JAPANESE_FUNCTION = frozenset({"助詞", "助動詞", "記号"})
# A katakana loanword of this many characters or more is the same word without its final long
# vowel mark (`パラメーター` and `パラメータ`, `デバッガー` and `デバッガ`: both spellings
# are in use), as Lucene's JapaneseKatakanaStemFilter has it, at its minimum length.
KATAKANA_STEM = 4


@cache
def _kiwi() -> Any:
    from kiwipiepy import Kiwi

    return Kiwi(load_multi_dict=False, load_typo_dict=False)


@cache
def _ipadic() -> Any:
    import lindera

    builder = lindera.TokenizerBuilder()
    builder.set_mode("normal")
    builder.set_dictionary("embedded://ipadic")
    return builder.build()


@lru_cache(maxsize=65536)
def korean(word: str) -> tuple[str, ...]:
    """The content morphemes of the Korean `word` (a run of Hangul), in order; () when it is
    all particles and endings."""
    return tuple(
        token.form
        for token in _kiwi().tokenize(word)
        if str(token.tag).split("-")[0] in KOREAN_CONTENT
    )


def japanese(run: str) -> tuple[str, ...]:
    """The words of a run of Japanese, each in its dictionary form (its surface where IPADIC has
    none: an unknown katakana word)."""
    words = []
    for token in _ipadic().tokenize(run):
        details = token.details
        if details[0] in JAPANESE_FUNCTION:
            continue
        word = details[6] if len(details) > 6 and details[6] != "*" else token.surface
        if len(word) >= KATAKANA_STEM and word[-1] == "ー" and _KATAKANA_WORD.match(word):
            word = word[:-1]
        words.append(word)
    return tuple(words)


def japanese_knows(text: str) -> bool:
    """Whether IPADIC knows every Han character of `text` as part of a word: a character it
    does not (no reading) is one Japanese does not write, as simplified Chinese `带` or `认`."""
    return all(
        len(token.details) > 7 and token.details[7] != "*"
        for run in _HAN_RUN.findall(text)
        for token in _ipadic().tokenize(run)
    )


def chinese(run: str, stored: bool = False) -> tuple[str, ...]:
    """The words of a run of Chinese; when `stored`, each word's shorter words in the dictionary
    too (jieba's search mode: `老和尚` is `和尚` and `老和尚`), so that a query of one part of a
    longer word meets it."""
    import rjieba

    return tuple(rjieba.cut_for_search(run) if stored else rjieba.cut(run))


def words(run: str, languages: Sequence[str], stored: bool = False) -> list[str]:
    """The index terms of a run of CJK characters in a text of `languages` (a stored chunk's
    one; a query's few): a Hangul run's Korean morphemes; another run's Japanese and Chinese
    words, in each of the two among `languages`, or else in the one its script says (kana:
    Japanese; Han alone: Chinese); a Chinese word's shorter words too when `stored`."""
    if _HANGUL_WORD.match(run):
        return list(korean(run))
    analysed = [lang for lang in dict.fromkeys(languages) if lang in ("ja", "zh")]
    if not analysed:
        analysed = ["ja" if _KANA.search(run) else "zh"]
    terms: list[str] = []
    for lang in analysed:
        terms.extend(japanese(run) if lang == "ja" else chinese(run, stored))
    return terms
