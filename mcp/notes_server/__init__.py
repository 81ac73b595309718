"""The MCP server: tools over kb, the HTTP app, the dashboard."""
