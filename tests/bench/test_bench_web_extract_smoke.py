"""bench/web_extract.py runs on the recorded pages and still says what made trafilatura the
extractor kept (bench/results/web-extraction.md)."""

from __future__ import annotations

from bench import web_extract


def test_the_extraction_bench_finds_trafilatura_keeps_more_article_and_less_boilerplate() -> None:
    result = web_extract.measure(repeat=1)
    kept = result["totals"]["trafilatura"]
    other = result["totals"]["readability-lxml"]
    assert len(result["rows"]) == 2 * result["pages"] == 10
    assert kept["kept"] == 1.0 and kept["left"] <= 0.05 and kept["titles"] == 5
    assert kept["kept"] > other["kept"] and kept["left"] < other["left"]
