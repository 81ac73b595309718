"""Composition: settings to backend, the hand-off, local stack, status, CLI."""
