"""From `make local` on a fresh clone to the first answer of `uv run query.py`, as a new user
without Docker meets it: no .venv (make local creates it and installs the embedder's stack from
uv's cache), the model a folder or in the Hugging Face cache, notes dropped in the inbox.

    uv run bench/first_answer.py --model PATH_OR_HUB_ID [--notes DIR]

The clone is this working tree's files as git lists them (uncommitted changes included), copied
to a temporary folder; the notes (bench/notes_corpus/notes by default: 39 notes) are copied into
its inbox, which the MCP server's watcher indexes. `uv run query.py` is run again until it
prints an answer. Prints the seconds to `MCP server ready` and to that first answer, and whether
uv's cache held the embedder's stack already (warm) or not.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

if not __package__:  # `uv run bench/NAME.py`: bench/ is the checkout's, not an installed package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import REPO_ROOT, cpu_name, free_port

NOTES = REPO_ROOT / "bench" / "notes_corpus" / "notes"
QUERY, EXPECTED = "how do I tune autovacuum on a busy table?", "postgres-vacuum"
DEADLINE_S = 1800.0


def fresh_clone(folder: Path) -> Path:
    """This working tree as a fresh clone holds it: the files git tracks or would track (no
    .venv, no data, no .env), uncommitted changes included."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is left out
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


def user_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` as from a user's shell: none of this process's virtual environment."""
    shell = {k: v for k, v in env.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    ours = str(Path(sys.executable).parent)
    shell["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != ours)
    return shell


def stack_cached() -> bool:
    """Whether uv's cache holds torch already (a warm cache: nothing is downloaded)."""
    cache = subprocess.run(["uv", "cache", "dir"], capture_output=True, text=True, check=True)
    return any(Path(cache.stdout.strip()).glob("*/*/torch*"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="EMBED_MODEL: a folder or a cached hub id")
    parser.add_argument("--notes", type=Path, default=NOTES, help="notes for the inbox")
    args = parser.parse_args()
    warm = stack_cached()
    with tempfile.TemporaryDirectory(prefix="first-answer-") as tmp:
        root = Path(tmp)
        clone = fresh_clone(root / "clone")
        shutil.copytree(args.notes, root / "inbox")
        env = user_env(os.environ) | dict(
            EMBED_MODEL=str(args.model),
            RERANK_MODEL="",
            EMBED_URL=f"http://127.0.0.1:{free_port()}",
            MCP_PORT=str(free_port()),
            NOTES_DIR=str(root / "inbox"),
            STATE_DIR=str(root / "state"),
            QDRANT_PATH=str(root / "storage"),
            NOTE_FOLDERS="",
        )
        start = time.monotonic()
        local = subprocess.Popen(
            ["make", "local"], cwd=clone, env=env, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        ready = threading.Event()

        def watch() -> None:
            assert local.stdout is not None
            for line in local.stdout:
                if "MCP server ready" in line:
                    ready.set()

        threading.Thread(target=watch, daemon=True).start()
        try:
            while not ready.wait(0.5):
                if local.poll() is not None or time.monotonic() - start > DEADLINE_S:
                    print("error: make local did not get ready", file=sys.stderr)
                    return 1
            ready_s = time.monotonic() - start
            while True:
                query = subprocess.run(
                    ["uv", "run", "query.py", QUERY], cwd=clone, env=env,
                    capture_output=True, text=True,
                )  # fmt: skip
                if query.returncode == 0 and EXPECTED in query.stdout:
                    break
                if time.monotonic() - start > DEADLINE_S:
                    print(f"error: no answer: {query.stderr.strip()}", file=sys.stderr)
                    return 1
            answer_s = time.monotonic() - start
        finally:
            os.killpg(local.pid, signal.SIGINT)
            local.wait(timeout=60)
    print(f"CPU: {cpu_name()} ({os.cpu_count()} logical); uv cache: {'warm' if warm else 'cold'}")
    print(f"model: {args.model}; notes: {sum(1 for p in args.notes.rglob('*') if p.is_file())}")
    print(f"make local on a fresh clone -> MCP server ready: {ready_s:.1f} s")
    print(f"make local on a fresh clone -> first answer of uv run query.py: {answer_s:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
