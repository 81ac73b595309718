"""`make local`, end to end: the embedder and the MCP server on the host with embedded storage;
ingest.py alongside (the server runs it), mcp/check.py and smoke.py, and Ctrl-C stops all."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import REPO_ROOT, free_port
from ingest_fixtures import KIMCHI, SHOCK, make_settings, run_script, script_env, write

STARTUP_S = 300


def make_local_command() -> list[str]:
    """The `local` target's recipe, as `make local` runs it, with this venv's Python for uv."""
    recipe = re.search(r"^local:.*\n\t(.+)$", (REPO_ROOT / "Makefile").read_text(), re.M)
    assert recipe is not None, "Makefile has no `local` target"
    assert recipe.group(1).split() == ["$(UV)", "run", "local.py"]
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


def test_make_local_serves_ingest_search_and_stops_everything_on_ctrl_c(
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

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, log_text(log)
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


def log_text(log) -> str:
    log.flush()
    log.seek(0)
    return log.read()[-3000:]
