"""Composition: settings to backend, the one access to the notes, local stack, status, CLI."""
