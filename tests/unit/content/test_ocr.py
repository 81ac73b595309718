"""The text inside images and scanned PDF pages (kb.content.ocr): a PNG rendered from a font and
an image-only PDF in a NOTE_FOLDERS folder, ingested by the real ingest with the real RapidOCR
and the in-process embedder, then searched through the MCP tools."""

from __future__ import annotations

import io
import shutil
import stat
from pathlib import Path

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from format_files import png
from helpers import free_port
from ingest_fixtures import make_settings
from mcp_fixtures import call_tool, results, serve_in_process, tool_answer

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.content import formats, ocr
from kb.content.formats.base import FormatError
from kb.core import kinds
from kb.core.settings import Settings
from kb.ingest.progress import Summary

WHITEBOARD = ["Sprint review: migrate the billing", "service to Kubernetes by Friday"]
RECEIPT_1 = ["Hardware store receipt", "cordless drill 129 EUR"]
RECEIPT_2 = ["Second page: garden hose", "and watering can 24 EUR"]
WITH_IMAGES = ",".join((kinds.DEFAULT_EXTENSIONS, *kinds.IMAGES))  # images are opted into


def image_only_pdf(*pages: list[str]) -> bytes:
    """A PDF whose pages are each one picture of text, with no text layer (a scan)."""
    from fpdf import FPDF

    pdf = FPDF()
    for lines in pages:
        pdf.add_page()
        pdf.image(io.BytesIO(png(lines)), x=10, y=10, w=190)
    return bytes(pdf.output())


def write_vault(folder: Path) -> Path:
    (folder / "attachments").mkdir(parents=True)
    (folder / "attachments" / "whiteboard.png").write_bytes(png(WHITEBOARD))
    (folder / "scans").mkdir()
    (folder / "scans" / "receipt.pdf").write_bytes(image_only_pdf(RECEIPT_1, RECEIPT_2))
    (folder / "attachments" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    (folder / "attachments" / "sky.png").write_bytes(png([]))  # a picture with no words
    (folder / "plans.md").write_text("# Plans\n\nRepaint the shed before the autumn rain.\n")
    return folder


def ingest(settings: Settings, transport: httpx.BaseTransport) -> Summary:
    with embed_client(settings, transport=transport) as client, open_store(settings) as store:
        return run(settings, client, store)


def vault_settings(root: Path, **overrides: object) -> Settings:
    folders = f"vault={root / 'vault'}"
    return make_settings(
        root, IN_PROCESS_EMBED_URL, NOTE_FOLDERS=folders, INDEX_EXTENSIONS=WITH_IMAGES, **overrides
    )


@pytest.fixture(scope="module")
def corpus(
    tmp_path_factory: pytest.TempPathFactory, embedder_transport: httpx.BaseTransport
) -> tuple[Settings, Summary]:
    root = tmp_path_factory.mktemp("ocr")
    write_vault(root / "vault")
    settings = vault_settings(root)
    return settings, ingest(settings, embedder_transport)


def test_the_words_in_a_png_and_an_image_only_pdf_are_found_with_their_locators(
    corpus, tmp_path, embedder_transport
):
    settings, _ = corpus
    copy = tmp_path / "qdrant"
    shutil.copytree(settings.QDRANT_PATH, copy)
    served = settings.model_copy(update={"QDRANT_PATH": str(copy), "MCP_PORT": free_port()})
    with serve_in_process(served, transport=embedder_transport) as server:
        query = {"query": "migrate billing to Kubernetes", "k": 1}
        [hit] = results(call_tool(server.url, "search_notes", query))
        assert hit["source"] == "vault/attachments/whiteboard.png"
        assert hit["locator"] == "image"
        query = {"query": "garden hose and watering can", "k": 1}
        [hit] = results(call_tool(server.url, "search_notes", query))
        assert hit["source"] == "vault/scans/receipt.pdf"
        assert hit["locator"] == "p. 2"
        read = {"source": "vault/scans/receipt.pdf"}
        text = tool_answer(call_tool(server.url, "read_note", read))["text"]
        assert "[p. 1]" in text and "cordless drill" in text and "garden hose" in text


def test_a_damaged_image_fails_alone_and_the_files_beside_it_are_indexed(corpus):
    _, summary = corpus
    assert set(summary.added) == {
        "vault/attachments/whiteboard.png", "vault/scans/receipt.pdf", "vault/plans.md"
    }  # fmt: skip
    [failure] = summary.failed
    assert failure.source == "vault/attachments/broken.png"
    assert failure.reason == "not an image that can be read (an unknown format, or damaged)"


def test_an_image_without_words_is_skipped_and_counted_not_failed(corpus):
    _, summary = corpus
    assert summary.skipped["no text in the image (OCR)"] == 1
    assert ("vault/attachments/sky.png", "no text in the image (OCR)") in summary.skipped_paths
    assert "vault/attachments/sky.png" not in {f.source for f in summary.failed}


def test_ocr_runs_once_per_content_hash_in_an_owner_only_cache(
    tmp_path, embedder_transport, monkeypatch
):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "whiteboard.png").write_bytes(png(WHITEBOARD))
    settings = vault_settings(tmp_path)
    assert ingest(settings, embedder_transport).added == ["vault/whiteboard.png"]
    cache = settings.STATE_DIR / ocr.CACHE_NAME
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600

    def never(image: object) -> str:
        raise AssertionError("OCR ran again on an image it had read")

    monkeypatch.setattr(ocr, "recognise", never)
    shutil.copy(vault / "whiteboard.png", vault / "same picture, renamed.png")
    summary = ingest(settings, embedder_transport)
    assert summary.added == ["vault/same picture, renamed.png"] and not summary.failed
    again = formats.parse("copy.png", (vault / "whiteboard.png").read_bytes(), 1500)
    assert "Kubernetes" in again.text  # read_note's way: the cache too


def test_with_ocr_off_images_are_not_listed_and_a_scanned_pdf_says_why(
    tmp_path, embedder_transport, monkeypatch
):
    write_vault(tmp_path / "vault")

    def never(image: object) -> str:
        raise AssertionError("OCR ran with OCR=off")

    monkeypatch.setattr(ocr, "recognise", never)
    settings = vault_settings(tmp_path, OCR="off")
    assert ".png" not in settings.index_extensions
    summary = ingest(settings, embedder_transport)
    assert summary.added == ["vault/plans.md"]
    [failure] = summary.failed
    assert failure.source == "vault/scans/receipt.pdf" and "OCR=off" in failure.reason


def test_images_are_indexed_only_once_listed_in_index_extensions(tmp_path):
    assert not set(kinds.IMAGES) & set(make_settings(tmp_path).index_extensions)


def test_an_image_over_the_pixel_cap_is_refused_before_it_is_decoded(monkeypatch):
    monkeypatch.setattr(ocr, "MAX_PIXELS", 1000)
    ocr.configure(True, None)
    with pytest.raises(FormatError, match=r"too large for OCR \(760 x 160 pixels > 1,000\)"):
        formats.parse("big.png", png(WHITEBOARD), 1500)


def test_text_in_image_reads_the_lines_of_a_picture_and_none_when_ocr_is_off():
    ocr.configure(True, None)
    assert ocr.text_in_image(png(WHITEBOARD)) == "\n".join(WHITEBOARD)
    ocr.configure(False, None)
    try:
        assert ocr.text_in_image(png(WHITEBOARD)) is None
    finally:
        ocr.configure(True, None)


@pytest.mark.parametrize(
    ("name", "kind"), [("a.jpg", "JPEG"), ("a.webp", "WEBP"), ("a.heic", "HEIF")]
)
def test_a_jpeg_a_webp_and_an_iphone_heic_photo_are_read_too(name, kind):
    import pillow_heif
    from PIL import Image

    pillow_heif.register_heif_opener()  # to write the HEIC; the reader registers it itself
    buffer = io.BytesIO()
    Image.open(io.BytesIO(png(WHITEBOARD))).save(buffer, kind)
    ocr.configure(True, None)
    assert formats.parse(name, buffer.getvalue(), 1500).text == "\n".join(WHITEBOARD) + "\n"
