"""bench/ocr.py runs and still says what made RapidOCR the engine (bench/README.md, OCR): it reads
a page rendered from a font and a poorly photographed one, word for word."""

from __future__ import annotations

from bench import ocr


def test_the_ocr_bench_finds_every_word_of_a_rendered_and_a_hard_photographed_page() -> None:
    rows = ocr.measure(pages=1, only=("rendered", "photographed, hard"))
    shipped = {r["set"]: r for r in rows if r["engine"] == "RapidOCR (shipped)"}
    assert shipped["rendered"]["cer"] == 0.0
    assert shipped["photographed, hard"]["words_found"] >= 0.95
    assert all(r["cpu_s_per_page"] > 0 and r["install_mb"] > 0 for r in rows)


def test_the_character_error_rate_counts_edits_over_the_reference() -> None:
    assert ocr.edit_distance("kitten", "sitting") == 3
    assert ocr.normalise(" a\n b  c ") == "a b c"
    assert ocr.words_found("Garden hose, 24 EUR", "garden hose 24") == 0.75
