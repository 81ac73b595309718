"""Images (PNG, JPEG, WebP, HEIC: screenshots, photographed whiteboards and pages) -> the text in
them, read by OCR (kb.content.ocr), located as `image`. Listed only while OCR is on
(Settings.index_extensions)."""

from __future__ import annotations

from kb.content import ocr
from kb.content.formats.base import FormatError, NoText, Parsed, TextBuilder

LOCATOR = "image"


def read(data: bytes) -> Parsed:
    try:
        text = ocr.text_in_image(data)
    except ocr.OcrError as exc:
        raise FormatError(exc.reason) from None
    if text is None:
        raise FormatError("OCR is off (OCR=off): the text in images is not read")
    if not text.strip():
        raise NoText("no text in the image (OCR)")
    out = TextBuilder()
    out.block(text, LOCATOR)
    out.add("\n")
    return Parsed(out.text, "prose", out.blocks)
