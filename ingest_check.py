"""End-to-end check of ingest + search against the configured embedder and Qdrant.

Uses its own temporary notes folder and its own collection (COLLECTION + "_ingest_check_<random>"),
never your notes, folders, playlists, bookmarks or collection (every setting marked SOURCE in
kb.core.settings is cleared), and removes both afterwards. With embedded storage (QDRANT_PATH)
that collection lives in a temporary storage folder of its own: embedded Qdrant is one process
per folder, and the MCP server may be holding yours. Checks: frontmatter (tags,
topic, document_date), date_ingested, the move into ingested/, search with a tag filter,
replacement of a re-dropped note (no stale chunks) and that a bad-YAML note stops the run.
Prints `ingest ok`, or one `error:` line and exits 1.
"""

from __future__ import annotations

import secrets
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kb.app.backend import embed_client, open_store
from kb.app.cli import fail, script
from kb.app.ingest import run
from kb.core.errors import IngestError
from kb.core.settings import Settings, get_settings
from kb.embedding.client import EmbedClient
from kb.search.filters import Filters
from kb.search.query import search, tag_usage
from kb.sources import registry
from kb.sources.files import INGESTED
from kb.store import collection
from kb.store.points import Store

KIMCHI = """---
tags: [Korean Cuisine, "recipes ", korean  cuisine]
topic: How I make kimchi at home.
document_date: 2024-03-01
---
# Kimchi

Salt a napa cabbage for two hours, rinse it, then rub in a paste of gochugaru, garlic,
ginger and fish sauce. Ferment it at room temperature for two days, then refrigerate.
"""
KIMCHI_V2 = """---
tags: fermentation
topic: Quick cucumber pickles.
---
Slice cucumbers, salt them for twenty minutes and cover them with rice vinegar and sugar.
"""
BREAD = """Knead the dough for ten minutes, let it rise for an hour, shape the loaf and bake it
in a hot oven until the crust is brown and it sounds hollow.
"""
SHOCK = """---
tags: aerodynamics
document_date: 2023-11-05 14:30:00
---
Across a normal shock wave in supersonic flow the pressure and density jump while the
velocity drops below the speed of sound.
"""
BAD_YAML = "---\ntags: [unclosed\ntopic: broken\n---\nThis note's frontmatter is broken.\n"


class CheckFailed(Exception):
    pass


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise CheckFailed(what)


def check(settings: Settings, client: EmbedClient, store: Store, notes: Path) -> None:
    (notes / "food").mkdir()
    (notes / "food" / "kimchi.md").write_text(KIMCHI, encoding="utf-8")
    (notes / "bread.txt").write_text(BREAD, encoding="utf-8")
    (notes / "shock.md").write_text(SHOCK, encoding="utf-8")
    before = datetime.now(UTC).replace(microsecond=0)

    summary = run(settings, client, store)
    expect(
        sorted(summary.ingested) == ["bread.txt", "food/kimchi.md", "shock.md"]
        and not summary.failed,
        f"first run ingested {summary.ingested}, failed {summary.failed}",
    )
    ingested = notes / INGESTED
    for source in ("food/kimchi.md", "bread.txt", "shock.md"):
        expect((ingested / source).is_file(), f"{source} was not moved into ingested/")
        expect(not (notes / source).exists(), f"{source} is still in the inbox")
    expect(not (notes / "food").exists(), "the inbox folder emptied by the moves is still there")

    hits = search(store, client, "how do I ferment cabbage?", k=3)
    expect(bool(hits) and hits[0].source == "food/kimchi.md", "kimchi note is not the top hit")
    top = hits[0]
    expect(top.tags == ["korean cuisine", "recipes"], f"tags not normalised: {top.tags}")
    expect(top.topic == "How I make kimchi at home.", f"topic is {top.topic!r}")
    expect(top.document_date == "2024-03-01", f"document_date is {top.document_date!r}")
    expect("---" not in top.text and "gochugaru" in top.text, "stored text is not the chunk")
    stamped = datetime.fromisoformat(top.date_ingested or "1970-01-01T00:00:00+00:00")
    expect(
        stamped.utcoffset() == timedelta(0) and before <= stamped <= datetime.now(UTC),
        f"date_ingested {top.date_ingested!r} is not the run's UTC time",
    )
    shock = search(store, client, "pressure jump across a shock", k=1)[0]
    expect(
        shock.source == "shock.md" and shock.document_date == "2023-11-05T14:30:00",
        f"datetime document_date is {shock.document_date!r}",
    )
    filtered = search(
        store, client, "baking bread", k=5, filters=Filters(tags=["  KOREAN cuisine"])
    )
    expect([h.source for h in filtered] == ["food/kimchi.md"], "tag filter returned other notes")
    notes_per_tag = {u.tag: u.notes for u in tag_usage(store)}
    expect(
        notes_per_tag == {"korean cuisine": 1, "recipes": 1, "aerodynamics": 1},
        f"tag counts are {notes_per_tag}",
    )

    # re-drop: the new version replaces the old chunks and the old file in ingested/
    (notes / "food").mkdir()  # ingest removed it once its note was moved out
    (notes / "food" / "kimchi.md").write_text(KIMCHI_V2, encoding="utf-8")
    summary = run(settings, client, store)
    expect(summary.replaced == ["food/kimchi.md"], f"re-drop replaced {summary.replaced}")
    expect(
        (ingested / "food" / "kimchi.md").read_text(encoding="utf-8") == KIMCHI_V2,
        "ingested/ still holds the old version",
    )
    texts = [p.get("text", "") for _, p in store.payloads("food/kimchi.md")]
    expect(
        len(texts) == 1 and "cucumbers" in texts[0],
        f"re-dropped note has {len(texts)} chunks (stale ones left?)",
    )
    hit = search(store, client, "cucumber pickles in vinegar", k=1)[0]
    expect(hit.tags == ["fermentation"] and hit.topic == "Quick cucumber pickles.", "old tags")

    # bad YAML stops the run, names the file and line, and leaves the note in the inbox
    (notes / "broken.md").write_text(BAD_YAML, encoding="utf-8")
    (notes / "later.txt").write_text(BREAD, encoding="utf-8")
    try:
        run(settings, client, store)
    except IngestError as exc:
        expect("broken.md" in str(exc) and "line " in str(exc), f"bad YAML error: {exc}")
    else:
        raise CheckFailed("a note with invalid YAML did not stop the run")
    expect((notes / "broken.md").is_file(), "the bad-YAML note left the inbox")
    expect((notes / "later.txt").is_file(), "the run went on after the bad-YAML note")


@script
def main() -> int:
    settings = get_settings()
    name = f"{settings.COLLECTION}_ingest_check_{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory(prefix="ingest-check-") as tmp:
        notes = Path(tmp) / "notes"
        notes.mkdir()
        # never the user's sources (folders, playlists, pages: only its own inbox), state or
        # (embedded: held by the MCP server?) storage folder
        own: dict[str, Path | str] = {"STATE_DIR": Path(tmp) / "state"}
        own["CODE_COLLECTION"] = f"{name}_code"  # never the user's code collection either
        if settings.QDRANT_PATH:
            own["QDRANT_PATH"] = str(Path(tmp) / "qdrant")
        settings = registry.without_sources(settings.model_copy(update=own), notes)
        with open_store(settings, name) as store, embed_client(settings) as client:
            client.health()  # a down embedder is reported as such, before any work
            try:
                check(settings, client, store, notes)
            except CheckFailed as exc:
                return fail(f"ingest check failed: {exc}")
            except IngestError as exc:
                # the embedder or Qdrant failing mid-check is reported as itself
                if exc.__cause__ is None:
                    return fail(f"ingest check failed: {exc}")
                raise
            finally:
                collection.drop(store)
    print("ingest ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
