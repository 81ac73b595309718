"""The MCP server's entry: `uv run mcp/server.py` (streamable HTTP) or `--stdio`; the container
runs `python mcp/server.py`. The server is the package notes_server (app.py builds it)."""

from notes_server.app import main

if __name__ == "__main__":
    raise SystemExit(main())
