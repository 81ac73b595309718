"""The chunk record has one home (kb/core/schema.py): what ingest writes, what search reads, what
the
MCP tool and its check declare all stay within it."""

from helpers import script_module

from kb.core.schema import (
    EMBEDDING,
    HIT_FIELDS,
    PAYLOAD_FIELDS,
    PAYLOAD_INDEXES,
    RESULT_ONLY_FIELDS,
    ChunkRecord,
    Hit,
    fingerprint,
    folders_of,
    note_uri,
    point_id,
)


def record(**changes) -> ChunkRecord:
    values = dict(
        text="Salt the cabbage.",
        source="recipes/kimchi.md",
        folders=folders_of("recipes/kimchi.md"),
        title="Kimchi",
        heading_path=["Kimchi"],
        chunk_index=0,
        tags=["recipes"],
        topic=None,
        document_date="2024-03-01",
        char_start=0,
        char_end=17,
        line_start=1,
        line_end=1,
    )
    return ChunkRecord(**(values | changes))


def test_the_mcp_result_model_and_the_mcp_check_use_only_fields_of_a_search_hit():
    from notes_server import surface

    hit = surface.SearchResults.model_json_schema()["$defs"]["Hit"]
    assert set(hit["properties"]) <= HIT_FIELDS
    check = script_module("mcp/check.py")
    assert set(check.FIELDS) <= HIT_FIELDS


def test_every_index_and_every_hit_field_is_a_payload_field():
    # EMBEDDING is storage state (a point waiting for its dense vector), never a note's field
    assert set(PAYLOAD_INDEXES) <= PAYLOAD_FIELDS | {EMBEDDING}
    assert EMBEDDING not in PAYLOAD_FIELDS and EMBEDDING not in HIT_FIELDS
    assert HIT_FIELDS - RESULT_ONLY_FIELDS <= PAYLOAD_FIELDS
    assert set(record().payload()) == PAYLOAD_FIELDS


def test_a_hit_reads_back_every_user_field_of_a_stored_payload():
    stored = record(date_ingested="2024-03-02T10:00:00+00:00", note_hash="h").payload()
    hit = Hit.from_payload(0.5, stored)
    expected = {k: v for k, v in stored.items() if k in HIT_FIELDS}
    made_by_search = {"score": 0.5, "hidden_chars_removed": 0, "rerank_score": None,
                      "links_out": 0, "links_in": None,
                      "stale": None, "confidence": None, "explain": None,
                      "uri": note_uri(stored["source"], stored["line_start"],
                                      stored["line_end"])}  # fmt: skip
    assert hit.to_dict() == expected | made_by_search


def test_a_hit_shows_a_notes_most_specific_tags_and_counts_its_links():
    stored = record(
        tags=["project", "project/alpha", "project/alpha/design", "work"],
        aliases=["Alpha"],
        links=["Projects/ADR-007.md", "People/Priya.md"],
    ).payload()
    hit = Hit.from_payload(0.5, stored)
    assert hit.tags == ["project/alpha/design", "work"]
    assert (hit.aliases, hit.links_out, hit.links_in) == (["Alpha"], 2, None)


def test_a_hit_of_a_point_from_an_older_version_has_empty_fields_not_errors():
    hit = Hit.from_payload(
        1, {"text": 3, "source": "a.md", "tags": "not a list", "line_start": True}
    )
    assert (hit.text, hit.source, hit.tags, hit.line_start) == ("", "a.md", [], None)


def test_the_fingerprint_ignores_the_ingest_date_and_changes_with_anything_written():
    pid = point_id("recipes/kimchi.md", 0)
    base = fingerprint("m", 4, 1, [(pid, "text", record())])
    dated = record(date_ingested="2030-01-01T00:00:00+00:00", note_hash="old")
    assert fingerprint("m", 4, 1, [(pid, "text", dated)]) == base
    assert fingerprint("m", 4, 1, [(pid, "text", record(tags=["other"]))]) != base
    assert fingerprint("m", 4, 1, [(pid, "other text", record())]) != base
    assert fingerprint("m2", 4, 1, [(pid, "text", record())]) != base
    assert fingerprint("m", 4, 2, [(pid, "text", record())]) != base
