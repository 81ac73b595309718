"""Create the stack's Qdrant keys in `.env` when it has none: `make keys` (run by `make up`).

    python3 kb/app/keys.py [ENV_FILE]        (default: the repository's .env)

Standard library only, so it runs before any environment exists. Writes strong random values
for QDRANT_API_KEY (read-write: Qdrant's service.api_key, used by the host scripts) and
QDRANT_READ_ONLY_API_KEY (Qdrant's service.read_only_api_key) when they are missing or empty,
and keeps existing ones and every other line, so `cp .env.example .env` before it loses nothing;
a missing .env starts as a copy of the .env.example beside it, so copying that afterwards is not
needed. MCP_QDRANT_API_KEY, the key compose gives the MCP server, is derived
on every run: the read-only key, or the read-write one when MCP_WRITE_TOOLS is on. It never
prints a key; the file is made readable by its owner only. docs/guide/security.md explains the keys.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from pathlib import Path

READ_WRITE = "QDRANT_API_KEY"
READ_ONLY = "QDRANT_READ_ONLY_API_KEY"
FOR_MCP = "MCP_QDRANT_API_KEY"
_LINE = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*")
_TRUE = {"1", "true", "yes", "on"}


def _values(lines: list[str]) -> dict[str, str]:
    """NAME -> value of the `NAME=value` lines (the last one wins, as for compose)."""
    out: dict[str, str] = {}
    for line in lines:
        m = _LINE.fullmatch(line)
        if m:
            out[m.group(1)] = m.group(2).strip("'\"")
    return out


def _set(lines: list[str], name: str, value: str) -> None:
    """Replace every `name=` line by one `name=value`, or append it."""
    kept = [i for i, line in enumerate(lines) if (m := _LINE.fullmatch(line)) and m[1] == name]
    for i in reversed(kept[1:]):
        del lines[i]
    if kept:
        lines[kept[0]] = f"{name}={value}"
    else:
        lines.append(f"{name}={value}")


def ensure_keys(env_file: Path) -> list[str]:
    """Create the missing keys in `env_file` and derive the MCP server's; the names created."""
    # a first .env is the template beside it (every setting, commented), with the keys added
    template = env_file.with_name(".env.example")
    source = env_file if env_file.exists() else template
    lines = source.read_text(encoding="utf-8").splitlines() if source.exists() else []
    values = _values(lines)
    created = []
    for name in (READ_WRITE, READ_ONLY):
        if not values.get(name):
            values[name] = secrets.token_urlsafe(32)  # 256 random bits
            _set(lines, name, values[name])
            created.append(name)
    write_tools = os.environ.get("MCP_WRITE_TOOLS", values.get("MCP_WRITE_TOOLS", ""))
    mcp_key = values[READ_WRITE if write_tools.strip().lower() in _TRUE else READ_ONLY]
    if values.get(FOR_MCP) != mcp_key:
        _set(lines, FOR_MCP, mcp_key)
    if created or values.get(FOR_MCP) != mcp_key:
        # a new file is owner-only from its first byte; an existing one is made so below
        fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
    os.chmod(env_file, 0o600)
    return created


def main(argv: list[str]) -> int:
    env_file = Path(argv[0]) if argv else Path(__file__).resolve().parents[2] / ".env"
    created = ensure_keys(env_file)
    if created:
        print(f"keys: created {', '.join(created)} in {env_file}")
    else:
        print(f"keys: {env_file} already has {READ_WRITE} and {READ_ONLY}; kept them")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
