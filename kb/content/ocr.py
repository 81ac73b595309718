"""The text inside images: screenshots and photos in the notes (kb.content.formats.image) and the
pages of a PDF that have no text layer (kb.content.formats.pdf), read once per content hash.

The engine is RapidOCR (PP-OCRv6 small on ONNX Runtime): its wheel carries its models, so nothing
is downloaded at run time, and bench/ocr.py measured it against Tesseract (bench/README.md, OCR).
It is imported on first use: a run that meets no image never loads it.

Bounded: an image is refused above MAX_PIXELS (decoded size; memory) and shrunk to MAX_SIDE on its
longer side before the engine sees it (time), so one image costs a few CPU seconds at most; a
failure is that file's alone (OcrError, which the readers turn into the file's FormatError).

Cached: what was read is kept by sha256 of (ENGINE, the bytes) in `STATE_DIR/ocr-cache.sqlite3`
(an owner-only file: it holds note text), so the same image, renamed, copied or re-ingested, is
never read twice. `configure` sets whether OCR runs (the OCR setting) and where the cache is;
kb.sources.registry and kb.app.backend call it with the settings before anything is read.

`text_in_image(bytes)` is the seam for any source holding images (an Evernote note's resources).
"""

from __future__ import annotations

import hashlib
import io
import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.core.state import private_file

if TYPE_CHECKING:
    from PIL.Image import Image

log = logging.getLogger(__name__)

ENGINE = "rapidocr 3.10.0 PP-OCRv6 small"  # in the cache key: another engine reads everything again
CACHE_NAME = "ocr-cache.sqlite3"
MAX_PIXELS = 50_000_000  # decoded pixels (a 50 MP photo; about 150 MB as RGB): larger is refused
MAX_SIDE = 2000  # the longer side the engine reads (RapidOCR's own limit): time per image bounded
MIN_SCORE = 0.5  # lines the engine is less sure of are dropped


class OcrError(Exception):
    """An image whose text cannot be read; `reason` says why, naming no text of it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Config:
    enabled: bool = True  # OCR
    cache: Path | None = None  # the cache file; None: nothing is cached


_config = Config()
_engine: Any = None
_engine_lock = threading.Lock()  # one image at a time: ONNX Runtime uses every core already


def configure(enabled: bool, state_dir: Path | None) -> None:
    """OCR on or off (the OCR setting), its cache in `state_dir` (None: no cache)."""
    global _config
    _config = Config(enabled, state_dir / CACHE_NAME if state_dir is not None else None)


def enabled() -> bool:
    return _config.enabled


def text_in_image(data: bytes) -> str | None:
    """The text in an image file's bytes (PNG, JPEG, WebP, HEIC: what Pillow opens), one line per
    line found, "" when it holds none; None when OCR is off. OcrError when it cannot be read."""
    if not _config.enabled:
        return None
    return cached(hashlib.sha256(data).hexdigest(), lambda: open_image(data))


def cached(key: str, image: Callable[[], Image]) -> str:
    """The text read from `image()`, kept under `key` (a content hash): a later call with the same
    key reads the cache and never calls `image`."""
    full_key = hashlib.sha256(f"{ENGINE}\0{key}".encode()).hexdigest()
    found = _lookup(full_key)
    if found is not None:
        return found
    text = recognise(image())
    _store(full_key, text)
    return text


def open_image(data: bytes) -> Image:
    """The image in `data` as RGB, upright (EXIF), at most MAX_SIDE on its longer side."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    _heif()
    try:
        with Image.open(io.BytesIO(data)) as opened:
            width, height = opened.size
            if width * height > MAX_PIXELS:
                raise OcrError(
                    f"image too large for OCR ({width} x {height} pixels > {MAX_PIXELS:,})"
                )
            opened.draft("RGB", (MAX_SIDE, MAX_SIDE))  # JPEG: decode at a smaller scale
            opened.thumbnail((MAX_SIDE, MAX_SIDE))  # shrunk first: one full-size copy at most
            upright = ImageOps.exif_transpose(opened).convert("RGB")
    except UnidentifiedImageError:
        raise OcrError("not an image that can be read (an unknown format, or damaged)") from None
    except Image.DecompressionBombError as exc:
        raise OcrError(f"image too large for OCR ({exc})") from None
    except (OSError, ValueError, SyntaxError) as exc:  # truncated or corrupt data
        raise OcrError(f"a damaged image ({exc})") from None
    return upright


def recognise(image: Image) -> str:
    """The lines the engine reads in `image`, top to bottom, joined by newlines."""
    with _engine_lock:
        try:
            result = _ocr_engine()(image)
        except Exception as exc:  # the engine's own failure: this image's, not the run's
            raise OcrError(f"OCR failed ({type(exc).__name__}: {exc})") from None
    lines = [
        text.strip()
        for text, score in zip(result.txts or (), result.scores or (), strict=False)
        if score >= MIN_SCORE and text.strip()
    ]
    return "\n".join(lines)


def _ocr_engine() -> Any:
    global _engine
    if _engine is None:
        from rapidocr import RapidOCR  # the models load here, from the wheel

        _engine = RapidOCR(params={"Global.log_level": "error", "Global.text_score": MIN_SCORE})
    return _engine


def _heif() -> None:
    """Let Pillow open HEIC (iPhone photos) where pillow-heif is installed."""
    try:
        import pillow_heif
    except ImportError:  # pragma: no cover - pinned in pyproject
        return
    pillow_heif.register_heif_opener()


def _connect(path: Path) -> sqlite3.Connection:
    private_file(path)
    db = sqlite3.connect(path, timeout=30)
    db.execute("CREATE TABLE IF NOT EXISTS texts (key TEXT PRIMARY KEY, text TEXT NOT NULL)")
    return db


def _lookup(key: str) -> str | None:
    path = _config.cache
    if path is None or not path.parent.is_dir():
        return None
    try:
        db = _connect(path)
        try:
            row = db.execute("SELECT text FROM texts WHERE key = ?", (key,)).fetchone()
        finally:
            db.close()
    except (sqlite3.Error, OSError) as exc:
        log.warning("OCR cache %s not read (%s): reading the image again", path, exc)
        return None
    return None if row is None else str(row[0])


def _store(key: str, text: str) -> None:
    path = _config.cache
    if path is None or not path.parent.is_dir():
        return
    try:
        db = _connect(path)
        try:
            with db:
                db.execute("INSERT OR REPLACE INTO texts (key, text) VALUES (?, ?)", (key, text))
        finally:
            db.close()
    except (sqlite3.Error, OSError) as exc:
        log.warning("OCR cache %s not written (%s)", path, exc)
