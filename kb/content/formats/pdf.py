"""PDF -> text by page (`p. N`), with pypdfium2 (PDFium: fast, keeps two-column pages whole).
A page without a text layer (scanned, photographed) is rendered and read by OCR
(kb.content.ocr) while OCR is on, cached by the PDF's hash and the page's number.

PDFium is not thread-safe, not even across documents: every call goes through one lock.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import time
from typing import TYPE_CHECKING

import pypdfium2 as pdfium

from kb.content import ocr
from kb.content.formats.base import FormatError, Parsed, TextBuilder

if TYPE_CHECKING:
    from PIL.Image import Image

_PDFIUM = threading.Lock()
OCR_DPI = 200  # a page is rendered at this resolution, at most ocr.MAX_SIDE on its longer side
OCR_SECONDS = 300.0  # a scanned PDF's pages after this much OCR time are left out (a notice)


def page_texts(data: bytes) -> list[str]:
    """Each page's text, in order; FormatError for an encrypted or unreadable PDF."""
    with _PDFIUM:
        try:
            document = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            if "password" in str(exc).lower():
                raise FormatError("encrypted PDF (password protected): no text to index") from None
            raise FormatError(f"not a readable PDF ({exc})") from None
        try:
            pages = []
            for page in document:
                textpage = page.get_textpage()
                pages.append(textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n"))
                textpage.close()
                page.close()
            return pages
        finally:
            document.close()


def render_page(data: bytes, index: int) -> Image:
    """Page `index` (0-based) as an RGB image for OCR: OCR_DPI, at most ocr.MAX_SIDE pixels."""
    with _PDFIUM:
        document = pdfium.PdfDocument(data)
        try:
            page = document[index]
            width, height = page.get_size()  # points: 72 per inch
            scale = min(OCR_DPI / 72, ocr.MAX_SIDE / max(width, height, 1.0))
            image = page.render(scale=scale).to_pil().convert("RGB")
            page.close()
            return image
        finally:
            document.close()


def _ocr_pages(data: bytes, pages: list[str]) -> str | None:
    """Fill in, by OCR, the pages of `pages` without text; a notice for those left unread."""
    blank = [i for i, page in enumerate(pages) if not page.strip()]
    if not blank or not ocr.enabled():
        return None
    digest = hashlib.sha256(data).hexdigest()
    failed: list[str] = []
    started = time.monotonic()
    for done, index in enumerate(blank):
        if time.monotonic() - started > OCR_SECONDS:
            left = [i + 1 for i in blank[done:]]
            failed.append(f"OCR stopped after {OCR_SECONDS:.0f} s: {len(left)} pages not read "
                          f"(from p. {left[0]})")  # fmt: skip
            break
        try:
            key = f"pdf\0{digest}\0{index}"
            pages[index] = ocr.cached(key, functools.partial(render_page, data, index))
        except ocr.OcrError as exc:
            failed.append(f"p. {index + 1}: {exc.reason}")
        except pdfium.PdfiumError as exc:
            failed.append(f"p. {index + 1}: not rendered for OCR ({exc})")
    return "; ".join(failed) or None


def read(data: bytes) -> Parsed:
    pages = page_texts(data)
    notice = _ocr_pages(data, pages)
    if not any(p.strip() for p in pages):
        if not ocr.enabled():
            raise FormatError(
                f"no text in its {len(pages)} pages (scanned or image-only PDF: OCR=off)"
            )
        raise FormatError(
            f"no text in its {len(pages)} pages, not even by OCR"
            + (f" ({notice})" if notice else "")
        )
    out = TextBuilder()
    for number, page in enumerate(pages, 1):
        out.add(f"[p. {number}]\n")  # read_note shows where each page starts
        out.block(page.strip("\n"), f"p. {number}")
        out.add("\n\n")
    return Parsed(out.text, "prose", out.blocks, notice=notice)
