"""Self-evaluation on the user's own notes (eval.py, `make eval`): the table on the repository's
dev notes with the test model, a private history that holds no note text, a worse run named with
what changed, and queries reworded by the model at LLM_URL (a loopback chat server answering as
an OpenAI-compatible one does)."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from helpers import REPO_ROOT, serve_in_thread
from ingest_fixtures import make_settings, run_script, script_env, write

from kb.app.evaluate import HISTORY, PARAPHRASE, PER_REQUEST

DEV_NOTES = REPO_ROOT / "bench" / "notes_corpus" / "notes"


def eval_py(tmp_path: Path, embedder_url: str, *args: str, **env: str):
    settings = make_settings(tmp_path, embedder_url)
    return run_script("eval.py", *args, env=script_env(settings, **env), cwd=tmp_path,
                      timeout=600)  # fmt: skip


def test_eval_prints_its_table_on_the_dev_notes_and_keeps_a_private_history_without_text(
    tmp_path: Path, embedder_url: str
) -> None:
    done = eval_py(tmp_path, embedder_url, "--notes", str(DEV_NOTES))
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[2:5]}
    assert set(rows) == {"keyword", "semantic", "hybrid"}
    assert all(0.5 < float(value) <= 1.0 for values in rows.values() for value in values)
    assert re.match(r"\d+ queries from your notes \(\d+ titles, \d+ topics, \d+ headings\)",
                    done.stdout)  # fmt: skip
    history = tmp_path / "state" / HISTORY
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    text = history.read_text()
    titles = [line[2:] for p in DEV_NOTES.rglob("*.md") for line in p.read_text().splitlines()
              if line.startswith("# ")]  # fmt: skip
    assert titles and not any(title in text for title in titles), "note text in the history"
    assert "kimchi" not in done.stderr.lower()  # nothing of the notes at INFO either
    # the same notes again, and a history line claiming better figures with another model
    line = json.loads(text.splitlines()[-1])
    line["metrics"] = {mode: {m: 1.0 for m in v} for mode, v in line["metrics"].items()}
    line["model"], line["at"] = "an-older-model", "2026-01-01T00:00:00+00:00"
    history.write_text(text + json.dumps(line) + "\n")
    again = eval_py(tmp_path, embedder_url, "--notes", str(DEV_NOTES))
    assert again.returncode == 1, again.stderr
    worse = [ln for ln in again.stdout.splitlines() if ln.startswith("worse than")]
    assert len(worse) == 1 and "2026-01-01" in worse[0] and "semantic ndcg@10 1.000 ->" in worse[0]
    assert "changed since: model an-older-model -> " in worse[0]
    assert len(history.read_text().splitlines()) == 3


@pytest.fixture
def rewording_model() -> Iterator[tuple[str, list[dict]]]:
    """An OpenAI-compatible chat server on loopback: it answers a numbered list of queries with
    the same list, each query reworded ("notes on" + the words reversed), and records requests."""
    received: list[dict] = []
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def completions(request: Request) -> dict:
        body = await request.json()
        received.append(body)
        asked = body["messages"][-1]["content"].splitlines()
        lines = []
        for line in asked:
            number, _, query = line.partition(". ")
            lines.append(f"{number}. notes on {' '.join(reversed(query.split()))}")
        message = {"role": "assistant", "content": "\n".join(lines)}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "local",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": usage}  # fmt: skip

    with serve_in_thread(app) as base:
        yield f"{base}/v1", received


def test_with_llm_url_the_queries_are_reworded_by_the_users_model(
    tmp_path: Path, embedder_url: str, rewording_model: tuple[str, list[dict]]
) -> None:
    url, received = rewording_model
    notes = tmp_path / "mine"
    for i, topic in enumerate(["Sourdough starter care", "Bleeding the radiators",
                               "Changing a bicycle chain"]):  # fmt: skip
        write(
            notes / f"n{i}.md", f"# {topic}\n\n## Why it matters here\n\nSome words on {topic}.\n"
        )
    done = eval_py(tmp_path, embedder_url, "--notes", str(notes), "--json", LLM_URL=url)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout.splitlines()[0])
    first_batch = received[0]["messages"][-1]["content"].splitlines()
    assert line["paraphrased"] is True and line["queries"] == len(first_batch)
    assert len(received) == -(-line["queries"] // PER_REQUEST)
    assert received[0]["messages"][0] == {"role": "system", "content": PARAPHRASE}
    assert "Sourdough starter care" in received[0]["messages"][-1]["content"]
    plain = eval_py(tmp_path, embedder_url, "--notes", str(notes), "--json", "--no-paraphrase",
                    LLM_URL=url)  # fmt: skip
    assert json.loads(plain.stdout.splitlines()[0])["paraphrased"] is False
    assert len(received) == -(-line["queries"] // PER_REQUEST)  # not asked again
