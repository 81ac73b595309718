"""The one Store facade over Qdrant (a server or the embedded engine)."""
