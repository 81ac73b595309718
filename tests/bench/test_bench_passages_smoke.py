"""bench/passages.py on the manual's definition questions: every question is judged against the
passage search shows for its page, and the count it prints is the count of its rows."""

from __future__ import annotations

from helpers import bench_json

from bench import passages


def test_each_definition_question_is_judged_by_the_passage_shown_for_its_page(embedder_url: str):
    out, result = bench_json("passages.py", embedder_url)
    assert result["questions"] == len(passages.sections()) >= 15
    answered = result["answered"]
    assert answered["best chunk"] == sum(row[3] == "yes" for row in result["rows"])
    assert answered["search"] == sum(row[5] == "yes" for row in result["rows"])
    # the first stage shows "what is a workflow" by another section, search by the page's start
    workflow = next(row for row in result["rows"] if row[1] == "what is a workflow")
    assert workflow[3:] == ["no", "Workflows", "yes"]
    assert "search: the defining passage for" in out


def test_a_passage_answers_when_it_is_the_section_or_holds_its_heading():
    assert passages.answers(["Workflows", "Chords"], "…", "Chords")
    assert passages.answers(["Retries", "The default policy"], "x\n### Jitter\ny", "Jitter")
    assert not passages.answers(
        ["Scheduling", "Periodic jobs", "Overlapping runs"], "…", "Periodic jobs"
    )
    assert not passages.answers([], "", "Leases")
