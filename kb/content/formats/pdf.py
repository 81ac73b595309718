"""PDF -> text by page (`p. N`), with pypdfium2 (PDFium: fast, keeps two-column pages whole).

PDFium is not thread-safe, not even across documents: every call goes through one lock.
"""

from __future__ import annotations

import threading

import pypdfium2 as pdfium

from kb.content.formats.base import FormatError, Parsed, TextBuilder

_PDFIUM = threading.Lock()


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


def read(data: bytes) -> Parsed:
    pages = page_texts(data)
    if not any(p.strip() for p in pages):
        raise FormatError(
            f"no text in its {len(pages)} pages (scanned or image-only PDF? run OCR on it first)"
        )
    out = TextBuilder()
    for number, page in enumerate(pages, 1):
        out.add(f"[p. {number}]\n")  # read_note shows where each page starts
        out.block(page.strip("\n"), f"p. {number}")
        out.add("\n\n")
    return Parsed(out.text, "prose", out.blocks)
