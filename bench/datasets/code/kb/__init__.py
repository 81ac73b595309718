"""Shared host library: settings, notes, chunking, store, search, ingest."""
