"""OCR engines side by side in one run: accuracy, CPU seconds per page and install size.

    uv run --group dev bench/ocr.py [--pages N] [--json]

Pages are rendered from a TrueType font (DejaVu Sans where the system has it, else Pillow's own)
at 150 dpi, A5-sized: a `rendered` copy as a screenshot is, the same text at 15 px (a screenshot
of an app), a `photographed` one (turned 2.5 degrees, blurred, with sensor noise and uneven
light, saved as a quality-60 JPEG) and a `hard` one (70 % the size, turned 4 degrees, more blur
and noise, quality 40). Accuracy is
the character error rate (edit distance / reference length, whitespace runs counted as one
space; lower is better) and the share of the page's words found (what search needs). CPU
seconds count every thread of this process and of child processes (Tesseract runs as one), the
first call (model load) apart. Size: the files of the engine's distributions and of its Debian
packages (dpkg's Installed-Size); Pillow and numpy, which the product has anyway, not counted.

RapidOCR is asked as the product asks it (kb.content.ocr.open_image and recognise, no cache);
Tesseract through pytesseract (needs Debian's tesseract-ocr; left out with a line saying so when
it is missing). Neither downloads anything.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import cpu_name, format_table

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
SOURCE_TEXT = (
    "the invoice for March lists 42 hours of consulting at 95.50 EUR an hour; payment is due "
    "within 30 days of receipt. Meeting notes: migrate the billing service to the new cluster, "
    "owner Priya, review on Thursday. Kimchi needs napa cabbage, gochugaru, garlic, ginger and "
    "fish sauce; ferment it for two days. Error 503 means the upstream server was unavailable. "
    "Whiteboard: quarterly goals, hiring plan, budget 2027, retrospective actions. Train "
    "departs 07:45 from platform 9, arrives in Lyon at 11:20. Password hints are never written "
    "down. The violin has four strings tuned in fifths: G, D, A and E."
)
WORDS = SOURCE_TEXT.split()


def page_text(seed: int, lines: int = 18, width: int = 52) -> str:
    """A page of plausible note text: `lines` lines of about `width` characters."""
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        line: list[str] = []
        while sum(len(w) + 1 for w in line) < width:
            line.append(rng.choice(WORDS))
        out.append(" ".join(line))
    return "\n".join(out)


def render(text: str, size: int = 26) -> Any:
    """`text` on an A5 page at 150 dpi (size 26: about 12 pt), or, small, as a screen shows it."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(str(FONT), size) if FONT.is_file() else ImageFont.load_default(size)
    image = Image.new("RGB", (874 * size // 26, 1240 * size // 26), "white")
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(text.splitlines()):
        draw.text((50 * size // 26, (60 + i * 42) * size // 26), line, font=font, fill=(20, 20, 20))
    return image


def photographed(image: Any, seed: int, hard: bool = False) -> Any:
    """`image` as a phone would take it: turned, blurred, noisy, unevenly lit, JPEG-compressed;
    `hard`: from further away (smaller), more turned, blurred and noisy, a worse JPEG."""
    import numpy as np
    from PIL import Image, ImageFilter

    angle, blur, noise, quality = (4.0, 1.5, 18.0, 40) if hard else (2.5, 1.1, 10.0, 60)
    if hard:
        image = image.resize((image.width * 7 // 10, image.height * 7 // 10))
    turned = image.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor="white")
    blurred = turned.filter(ImageFilter.GaussianBlur(blur))
    pixels = np.asarray(blurred, dtype=np.float32)
    rng = np.random.default_rng(seed)
    light = np.linspace(0.7 if hard else 0.8, 1.0, pixels.shape[1], dtype=np.float32)
    noisy = pixels * light[None, :, None] + rng.normal(0, noise, pixels.shape)
    out = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))
    buffer = io.BytesIO()
    out.save(buffer, "JPEG", quality=quality)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def words_found(reference: str, found: str) -> float:
    def words(text: str) -> list[str]:
        return re.findall(r"[a-z0-9]+", text.lower())

    have = set(words(found))
    wanted = words(reference)
    return sum(w in have for w in wanted) / max(len(wanted), 1)


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def dist_size(*dists: str) -> float:
    total = 0
    for dist in dists:
        try:
            files = metadata.files(dist) or []
        except metadata.PackageNotFoundError:
            continue
        for f in files:
            path = Path(str(f.locate()))
            total += path.stat().st_size if path.is_file() else 0
    return total / 1e6


def deb_size(*packages: str) -> float:
    if shutil.which("dpkg-query") is None:
        return float("nan")
    shown = subprocess.run(
        ["dpkg-query", "-Wf", "${Installed-Size}\n", *packages],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return sum(int(k) for k in shown.stdout.split() if k.isdigit()) / 1e3


def engines() -> dict[str, tuple[Callable[[Any], str], float, str]]:
    """name -> (image -> text, install MB, what it is)."""
    from kb.content import ocr

    found: dict[str, tuple[Callable[[Any], str], float, str]] = {}
    size = dist_size("rapidocr", "onnxruntime", "opencv-python-headless", "omegaconf",
                     "pyclipper", "shapely", "colorlog", "pillow-heif")  # fmt: skip
    found["RapidOCR (shipped)"] = (ocr.recognise, size, ocr.ENGINE)
    try:
        import pytesseract

        version = str(pytesseract.get_tesseract_version())
    except Exception as exc:
        print(f"Tesseract left out: {type(exc).__name__}: {exc} (apt-get install tesseract-ocr)")
        return found
    size = dist_size("pytesseract") + deb_size(
        "tesseract-ocr", "tesseract-ocr-eng", "tesseract-ocr-osd", "libtesseract5", "liblept5"
    )

    def tesseract(image: Any) -> str:
        return str(pytesseract.image_to_string(image, lang="eng"))

    found["Tesseract"] = (tesseract, size, f"tesseract {version}, eng, LSTM")
    return found


def measure(pages: int, only: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """One row per engine and set of pages; `only`: those sets."""
    from kb.content import ocr

    references = [page_text(seed) for seed in range(pages)]
    clean = [render(text) for text in references]
    sets = {
        "rendered": clean,
        "screenshot 15px": [render(text, 15) for text in references],
        "photographed": [photographed(img, seed) for seed, img in enumerate(clean)],
        "photographed, hard": [photographed(img, seed, True) for seed, img in enumerate(clean)],
    }
    # the product's own preparation (upright, at most MAX_SIDE) for every engine alike
    prepared: dict[str, list[Any]] = {}
    for name, images in sets.items():
        if only is not None and name not in only:
            continue
        prepared[name] = []
        for image in images:
            buffer = io.BytesIO()
            image.save(buffer, "PNG")
            prepared[name].append(ocr.open_image(buffer.getvalue()))
    results: list[dict[str, Any]] = []
    for name, (read, size, what) in engines().items():
        started = cpu_seconds()
        read(clean[0])  # loads the models
        load = cpu_seconds() - started
        for kind, images in prepared.items():
            errors = chars = 0
            found = 0.0
            started = cpu_seconds()
            wall = time.perf_counter()
            for reference, image in zip(references, images, strict=True):
                text = read(image)
                errors += edit_distance(normalise(text), normalise(reference))
                chars += len(normalise(reference))
                found += words_found(reference, text)
            results.append({"engine": name, "what": what, "set": kind, "cer": errors / chars,
                            "words_found": found / len(images),
                            "cpu_s_per_page": (cpu_seconds() - started) / len(images),
                            "wall_s_per_page": (time.perf_counter() - wall) / len(images),
                            "load_cpu_s": load, "install_mb": size,
                            "words": sum(len(r.split()) for r in references)})  # fmt: skip
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=3, help="pages of each kind (default 3)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = measure(args.pages)
    rows = [[r["engine"], r["set"], f"{r['cer']:.2%}", f"{r['words_found']:.1%}",
             round(r["cpu_s_per_page"], 2), round(r["wall_s_per_page"], 2),
             round(r["load_cpu_s"], 2), round(r["install_mb"], 1)] for r in results]  # fmt: skip
    load_avg = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    words = results[0]["words"] if results else 0
    print(f"CPU: {cpu_name()}; load average {load_avg}; {args.pages} A5 pages per set, "
          f"{words} words")  # fmt: skip
    print(format_table(["engine", "set", "CER", "words found", "CPU s/page", "wall s/page",
                        "load CPU s", "install MB"], rows))  # fmt: skip
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
