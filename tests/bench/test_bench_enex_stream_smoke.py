"""bench/enex_stream.py runs on a small export and compares both readers on the same notes."""

from __future__ import annotations

import json

import pytest

from bench import enex_stream


@pytest.mark.process  # each reader runs in a fresh interpreter
def test_the_enex_bench_reads_every_note_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    assert enex_stream.main(["--notes", "3", "--image-kb", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [side["notes"] for side in result["sides"].values()] == [3, 3]


def test_the_enex_bench_refuses_an_empty_export(capsys: pytest.CaptureFixture[str]) -> None:
    assert enex_stream.main(["--notes", "0"]) == 2
    assert "error: --notes and --image-kb must be at least 1" in capsys.readouterr().err
