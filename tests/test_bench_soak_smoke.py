"""bench/soak.py still runs end to end: a few seconds of searchers through the real MCP SDK client
and folder syncs on the server's own store, against the session's MiniLM embedder (no restart:
the bench's own restart needs an embedder process it owns). A smoke test, not a measurement:
the figures live in bench/README.md."""

from __future__ import annotations

from bench import soak


def test_a_short_soak_serves_every_search_and_keeps_every_note(embedder_url: str) -> None:
    r = soak.soak(12 / 60, searchers=2, sync_every=2.0, notes=8, embed_url=embedder_url)
    assert r["requests"] > 0 and r["errors_outside_restart"] == 0, r["other_errors"]
    assert r["syncs"] >= 2 and r["sync_errors"] == 0
    assert (r["lost_notes"], r["duplicated_chunks"], r["orphans"]) == (0, 0, 0)
    assert r["p50_ms"] > 0 and r["rss_mib"]["soak (server, searchers, sync)"][0] > 0
