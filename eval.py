"""Evaluate search on your own notes: queries made from their titles, headings, topics and
descriptions (reworded by the model at LLM_URL when it is set), run in every mode; prints R@5,
MRR@10 and nDCG@10 per mode and says when a change of model, chunking or settings made things
worse than the last run (docs/evaluation.md).

    uv run eval.py                    # the index (make eval)
    uv run eval.py --notes DIR        # a folder of notes, ingested into a temporary store first
    uv run eval.py --no-paraphrase    # the queries as the notes word them, even with LLM_URL

Exit status: 0, 1 when a metric fell since the last run on the same queries (or a failure, one
`error:` line), 2 for bad settings or arguments.
"""

from __future__ import annotations

from kb.app.evaluate import main

if __name__ == "__main__":
    raise SystemExit(main())
