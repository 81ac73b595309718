"""`STATE_DIR/server.json`: the MCP server that holds embedded storage, announced.

Embedded storage (QDRANT_PATH) opens in one process at a time. An MCP server over HTTP that
uses it announces itself in `STATE_DIR/server.json` (its address, pid and the pid's start time,
storage folder and a random key, readable only by the user), and withdraws it when it stops
(Ctrl-C or SIGTERM). A script finding it reaches the notes through that server (kb.app.notes,
kb.app.remote): its tools, and its hand-off routes (INGEST_PATH, LIFECYCLE_PATH, EVALUATE_PATH)
for whoever presents the key, which keeps them to whoever can read STATE_DIR.

A file left by a server that was killed names a process that is gone, or a pid the system has
since given to another process: neither is trusted (the pid must be alive, not a zombie, and
have started when the server did). A server that is alive but not accepting connections
(starting, or stopping) is reported as such.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb.core.settings import Settings

SERVER_FILE = "server.json"
INGEST_PATH = "/ingest"
LIFECYCLE_PATH = "/lifecycle"
EVALUATE_PATH = "/evaluate"
KEY_HEADER = "x-ingest-key"


@dataclass(frozen=True)
class Announced:
    url: str  # base URL, without /mcp
    pid: int
    qdrant_path: str
    key: str
    started: int | None = None  # the pid's start time (started_at); None where unknown


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold spaces); None when
    there is no such file (the process is gone, or this system has no /proc)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def started_at(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot; None where /proc does not say."""
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def alive(pid: int) -> bool:
    """Process `pid` exists and has not exited (a zombie, exited but not yet reaped by its
    parent, has: os.kill(pid, 0) alone would still find it)."""
    fields = _stat(pid)
    if fields is not None:
        return fields[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's: the request will tell
    return True


def _file(settings: Settings) -> Path:
    return Path(settings.STATE_DIR) / SERVER_FILE


def announce(settings: Settings) -> Announced:
    """Write server.json for this process (owner-only), replacing any stale one."""
    base = settings.mcp_url.removesuffix("/mcp")
    pid = os.getpid()
    found = Announced(
        base, pid, settings.QDRANT_PATH, secrets.token_urlsafe(32), started=started_at(pid)
    )
    path = _file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(found.__dict__, out)
    os.replace(tmp, path)
    return found


def withdraw(settings: Settings, mine: Announced) -> None:
    """Remove server.json if it is still this process's."""
    if read(settings) == mine:
        _file(settings).unlink(missing_ok=True)


def read(settings: Settings) -> Announced | None:
    try:
        data: dict[str, Any] = json.loads(_file(settings).read_text("utf-8"))
        started = data.get("started")
        return Announced(
            str(data["url"]), int(data["pid"]), str(data["qdrant_path"]), data["key"],
            started=None if started is None else int(started),
        )  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return None


def running(settings: Settings) -> Announced | None:
    """The announced server holding this QDRANT_PATH, if its process is still the one that
    wrote the file: alive, and started when it did."""
    found = read(settings)
    if found is None or found.qdrant_path != settings.QDRANT_PATH:
        return None
    if not alive(found.pid):
        return None
    if found.started is not None and started_at(found.pid) not in (None, found.started):
        return None  # the pid belongs to another process now
    return found
