"""`make local`, end to end: the embedder and the MCP server on the host with embedded storage;
ingest.py alongside (the server runs it), mcp/check.py and smoke.py, and Ctrl-C stops all,
quietly; and `make local` on a fresh clone, where `make venv` never ran, installs what it runs."""

import fcntl
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from helpers import REPO_ROOT, free_port
from ingest_fixtures import KIMCHI, SHOCK, make_settings, run_script, script_env, write

from bench.first_answer import fresh_clone, user_env

STARTUP_S = 300


def make_local_command() -> list[str]:
    """What the `local` target runs once it has installed the embedder's stack, with this
    venv's Python (the fresh-clone test below runs the whole recipe)."""
    recipe = re.search(r"^local:.*\n((?:\t.*\n)+)", (REPO_ROOT / "Makefile").read_text(), re.M)
    assert recipe is not None, "Makefile has no `local` target"
    assert recipe.group(1).splitlines()[-1].split() == ["@$(UV)", "run", "--no-sync", "local.py"]
    return [sys.executable, "local.py"]


def children_of(pid: int) -> set[int]:
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


def test_make_local_serves_ingest_search_and_stops_everything_on_sigterm(
    tmp_path: Path, minilm_path: Path
):
    embed_url = f"http://127.0.0.1:{free_port()}"
    mcp_port = free_port()
    settings = make_settings(tmp_path, embed_url, MCP_PORT=mcp_port)
    env = script_env(
        settings,
        MCP_PORT=str(mcp_port),
        EMBED_MODEL=str(minilm_path),
        EMBED_DTYPE="fp32",
        EMBED_THREADS="2",
        LOG_LEVEL="INFO",
    )
    write(settings.NOTES_DIR / "kimchi.md", KIMCHI)
    write(settings.NOTES_DIR / "shock.md", SHOCK)
    log = (tmp_path / "local.log").open("w+")
    proc = subprocess.Popen(
        make_local_command(), cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True
    )
    try:
        lines = []
        deadline = time.monotonic() + STARTUP_S
        while not any("MCP server ready" in line for line in lines):
            line = proc.stdout.readline()
            assert line or proc.poll() is None, f"local.py exited: {lines} {log_text(log)}"
            lines.append(line)
            assert time.monotonic() < deadline, f"not ready: {lines}"
        assert f"embedder ready at {embed_url}" in "".join(lines)
        assert f"MCP server ready at http://127.0.0.1:{mcp_port}/mcp" in "".join(lines)
        children = children_of(proc.pid)
        assert len(children) == 2

        # the server holds the storage: ingest.py hands its run to it and prints the summary
        ingest = run_script("ingest.py", env=env, cwd=tmp_path, timeout=240)
        assert ingest.returncode == 0, ingest.stderr
        assert "held by the MCP server" in ingest.stderr
        # the server's watcher (MCP_WATCH) may have synced them first: then nothing is left to do
        assert "failed 0" in ingest.stdout, ingest.stdout
        assert (settings.NOTES_DIR / "ingested" / "kimchi.md").is_file()

        check = run_script("mcp/check.py", env=env, cwd=tmp_path, timeout=120)
        assert check.stdout.strip().splitlines()[-1] == "mcp ok", check.stderr
        smoke = run_script("smoke.py", env=env, cwd=tmp_path, timeout=120)
        assert "smoke ok" in smoke.stdout, smoke.stderr
        query = run_script("query.py", "supersonic shock wave", env=env, cwd=tmp_path)
        assert query.returncode == 0 and "shock.md" in query.stdout, query.stderr

        # as a service manager stops it (Ctrl-C on a terminal: the fresh-clone test below)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log_text(log)
        said = proc.stdout.read()
        assert "stopped the embedder" in said and "stopped the MCP server" in said, said
        # a quiet console at INFO: no traceback, no line per request (health polls, searches)
        shown = log_text(log, chars=None)
        assert "Traceback" not in shown, shown[-3000:]
        assert "GET /" not in shown and "POST /" not in shown, shown[-3000:]
        assert "Terminating session" not in shown, shown[-3000:]  # the SDK, after each request
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in children if alive(pid)], "orphan processes left"
        assert not (settings.STATE_DIR / "server.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        log.close()


def log_text(log, chars: int | None = 3000) -> str:
    log.flush()
    log.seek(0)
    return log.read()[-chars:] if chars else log.read()


def in_terminal(argv: list[str], env: dict[str, str], cwd: Path, ready: str) -> tuple[int, str]:
    """Run `argv` on a terminal of its own, as a user does; once `ready` is shown, press
    Ctrl-C (the terminal sends SIGINT to its foreground process group, `make` included).
    The exit status and everything shown."""
    master, slave = pty.openpty()

    def take_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, preexec_fn=take_terminal
    )
    os.close(slave)
    shown, pressed = b"", False
    deadline = time.monotonic() + FRESH_S
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every process holding the terminal has exited
                    break
                if not chunk:
                    break
                shown += chunk
            if not pressed and ready.encode() in shown:
                os.write(master, b"\x03")
                pressed = True
        assert pressed, f"{ready!r} not shown in {FRESH_S} s: {shown.decode(errors='replace')}"
        return proc.wait(timeout=60), shown.decode(errors="replace")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)


FRESH_S = 900  # a virtual environment from uv's warm cache, then the model's load


@pytest.mark.slow
def test_make_local_on_a_fresh_clone_installs_what_it_runs_and_ctrl_c_stops_it_cleanly(
    tmp_path: Path, minilm_path: Path
):
    clone = fresh_clone(tmp_path / "clone")
    assert not (clone / ".venv").exists()
    settings = make_settings(tmp_path, f"http://127.0.0.1:{free_port()}")
    mcp_port = free_port()
    env = script_env(
        settings,
        MCP_PORT=str(mcp_port),
        EMBED_MODEL=str(minilm_path),
        RERANK_MODEL="",
        EMBED_THREADS="2",
        LOG_LEVEL="INFO",
    )
    status, shown = in_terminal(["make", "local"], user_env(env), clone, "MCP server ready")

    assert f"MCP server ready at http://127.0.0.1:{mcp_port}/mcp" in shown
    assert (clone / ".venv").is_dir()
    # a stop the user asked for: status 0, one line per service, no traceback, no make error
    assert status == 0, shown[-3000:]
    stops = re.findall(r"(?:stopped|did not stop)[^\r\n]*", shown[shown.index("^C") :])
    assert sorted(stops) == ["stopped the MCP server", "stopped the embedder"], shown[-3000:]
    assert "Traceback" not in shown and "make: ***" not in shown, shown[-3000:]
    assert "GET /health" not in shown, shown[-3000:]


def test_make_local_stops_at_once_naming_a_model_that_is_not_in_the_cache(tmp_path: Path):
    settings = make_settings(tmp_path, f"http://127.0.0.1:{free_port()}")
    env = script_env(
        settings,
        MCP_PORT=str(free_port()),
        EMBED_MODEL="someone/not-downloaded-model",
        HF_HOME=str(tmp_path / "hf"),
        RERANK_MODEL="",
    )
    # a failed load never recovers: one error line, not a 10-minute wait for /health
    done = subprocess.run(
        make_local_command(), cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 1, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the embedder cannot serve: EMBED_MODEL someone/not-downloaded")
    assert "not in the Hugging Face cache" in last
    assert "stopped the embedder" in done.stdout and "stopped the MCP server" in done.stdout
