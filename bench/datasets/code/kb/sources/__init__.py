"""Where notes come from: one module per kind of source (kb.sources.base says what one is)."""
