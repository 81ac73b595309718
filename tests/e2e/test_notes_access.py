"""Every query.py option and every ingest.py mode beside an MCP server that holds embedded
storage (what `make local` runs): each goes through the one access seam (kb.app.notes), found
from STATE_DIR/server.json, and the server answers it. One server process for the module."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO_ROOT
from ingest_fixtures import run_script, script_env, write
from mcp_fixtures import IngestedNotes, ServerFactory, ServerProcess
from mcp_fixtures import make_settings as settings_over

from kb.app.evaluate import HISTORY
from kb.core.settings import Settings


@dataclass
class Beside:
    settings: Settings
    server: ServerProcess
    env: dict[str, str]
    cwd: Path

    def run(self, script: str, *args: str) -> subprocess.CompletedProcess[str]:
        return run_script(script, *args, env=self.env, cwd=self.cwd, timeout=240)


@pytest.fixture(scope="module")
def beside(
    tmp_path_factory: pytest.TempPathFactory,
    ingested_notes: IngestedNotes,
    embedder_url: str,
    start_server: ServerFactory,
) -> Iterator[Beside]:
    root = tmp_path_factory.mktemp("beside")
    shutil.copytree(ingested_notes.qdrant_path, root / "qdrant")
    shutil.copytree(ingested_notes.qdrant_path.parent / "data", root / "data")
    settings = settings_over(
        embedder_url, root / "qdrant", NOTES_DIR=root / "data", STATE_DIR=root / "state"
    )
    server = start_server(
        EMBED_URL=embedder_url,
        QDRANT_PATH=settings.QDRANT_PATH,
        STATE_DIR=str(settings.STATE_DIR),
        NOTES_DIR=str(settings.NOTES_DIR),
        MCP_WATCH="false",
    )
    server.wait_healthy()  # it opened the storage: no other process can
    # no MCP_PORT, no MCP_URL: the scripts find the server from STATE_DIR/server.json alone
    yield Beside(settings, server, script_env(settings), root)


QUERIES = {
    "plain": (["how do I make kimchi?"], "search_notes k=5"),
    "json and filters": (
        ["ownership", "--mode", "keyword", "-k", "3", "--tags", "programming", "--json"],
        "search_notes k=3 mode=keyword",
    ),
    "explain": (["supersonic shock", "--explain", "--per-note", "0"], "explain=True"),
    "max chars": (["kimchi", "--max-chars", "400", "--no-rerank"], "max_chars=400"),
    "related": (["--related", "cooking/kimchi.md", "-k", "2"], "related_notes notes="),
    "why": (["--why", "cooking/kimchi.md", "fermented cabbage"], "why_not_found state="),
    "show": (["--show", "cooking/kimchi.md:1"], "read_note lines="),
}


@pytest.mark.parametrize("case", list(QUERIES))
def test_every_query_option_is_answered_by_the_server_holding_the_storage(
    beside: Beside, case: str
) -> None:
    args, logged = QUERIES[case]
    before = beside.server.log.count(logged)
    done = beside.run("query.py", *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), done.stderr
    assert "in use by another process" not in done.stderr
    assert beside.server.log.count(logged) == before + 1, beside.server.log[-2000:]
    if "--json" in args:
        assert json.loads(done.stdout)["results"]


def test_what_the_servers_tools_cannot_take_is_said_not_dropped(beside: Beside) -> None:
    done = beside.run("query.py", "kimchi", "-k", "30")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.strip() == "error: -k 30: through the MCP server at most 20"
    why = beside.run("query.py", "--why", "cooking/kimchi.md", "kimchi", "--per-note", "2")
    assert (why.returncode, why.stdout) == (1, "")
    assert "--why with --per-note 2: through the MCP server" in why.stderr


def test_ingest_py_runs_its_ingest_in_the_server_and_reports_its_summary(
    beside: Beside,
) -> None:
    write(beside.settings.NOTES_DIR / "trips.md", "# Trips\n\nA walk along the cliffs at dusk.\n")
    done = beside.run("ingest.py", "--allow-deletes")
    assert done.returncode == 0, done.stderr
    assert "is held by the MCP server" in done.stderr and "it runs this ingest" in done.stderr
    assert "1 new" in done.stdout and "failed 0" in done.stdout, done.stdout
    assert (beside.settings.NOTES_DIR / "ingested" / "trips.md").is_file()
    again = beside.run("ingest.py")
    assert again.returncode == 0, again.stderr
    # nothing embedded: no pace (an unchanged run once said "649.9 chunks/s")
    assert "0 new, 0 replaced" in again.stdout and "chunks/s" not in again.stdout, again.stdout


def test_deleting_restoring_and_purging_a_note_go_through_the_server(beside: Beside) -> None:
    note = "misc/fact-00.txt"
    deleted = beside.run("ingest.py", "--delete", note)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith(f"deleted {note} (kept, hidden")
    listed = beside.run("ingest.py", "--list-deleted")
    assert listed.returncode == 0 and listed.stdout.startswith(f"{note}  "), listed.stderr
    assert listed.stdout.rstrip().endswith("1 deleted notes")
    restored = beside.run("ingest.py", "--restore", note)
    assert restored.stdout.strip() == f"restored {note}", restored.stderr
    purged = beside.run("ingest.py", "--purge-deleted")
    assert purged.stdout.strip() == "purged 0 notes deleted more than 90 days ago", purged.stderr
    gone = beside.run("ingest.py", "--delete", "misc/fact-01.txt", "--hard")
    assert gone.stdout.strip() == "deleted for good: misc/fact-01.txt", gone.stderr
    log = beside.server.log
    assert log.count("lifecycle on request:") == 4 and "list_deleted notes=1" in log


def test_eval_py_measures_the_index_in_the_server_and_keeps_the_history_here(
    beside: Beside,
) -> None:
    done = beside.run("eval.py", "--limit", "5", "--no-paraphrase")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("5 queries from your notes"), done.stdout
    assert "eval on request: limit=5" in beside.server.log
    assert (beside.settings.STATE_DIR / HISTORY).is_file()


def test_ingest_py_watch_says_the_server_watches_or_how_to_make_it(beside: Beside) -> None:
    done = beside.run("ingest.py", "--watch")
    assert (done.returncode, done.stdout) == (1, "")
    assert "is held by" not in done.stderr  # said once, plainly:
    assert done.stderr.strip().endswith("restart the server with MCP_WATCH=true")


# what a search through the server never needs: Qdrant's client and models, the embedding
# model's stack, every language's stemmer and analyser, the secret scanner of reading notes, and
# the MCP SDK (its client loads its server stack too: uvicorn, starlette)
NOT_ON_THE_SERVERS_PATH = {
    *("qdrant_client", "qdrant_edge", "torch", "numpy", "snowballstemmer", "detect_secrets"),
    *("wordfreq", "kiwipiepy"),  # German compounds, Korean morphemes: loaded on first use
    *("mcp", "uvicorn", "starlette", "httpx"),
}


def test_a_search_through_the_server_imports_only_what_that_path_needs(beside: Beside) -> None:
    before = beside.server.log.count("search_notes k=")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(REPO_ROOT / "query.py"), "kimchi"],
        env=beside.env, cwd=beside.cwd, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and "kimchi" in done.stdout, done.stderr[-2000:]
    assert beside.server.log.count("search_notes k=") == before + 1  # the server answered
    imported = {
        line.split("|")[-1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert not imported & NOT_ON_THE_SERVERS_PATH, imported & NOT_ON_THE_SERVERS_PATH
