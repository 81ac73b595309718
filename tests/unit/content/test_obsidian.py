"""Obsidian vaults as Obsidian users write them (issue 30): inline and nested tags, aliases,
properties under Obsidian's keys, daily notes, links resolved like Obsidian, callouts, comments,
highlights, tasks, block ids and canvases; then the vault's graph through search, list_tags,
related notes, status, read_note, query.py, the MCP tools and the dashboard.

The vault is tests/obsidian_vault (small, every construct once); the end-to-end tests index it
as a NOTE_FOLDERS folder with the real MiniLM embedder and embedded Qdrant.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import REPO_ROOT, free_port
from ingest_fixtures import make_settings, run_script, script_env, write
from mcp_fixtures import call_tool, serve_in_process, tool_answer

from kb.app import status as kb_status
from kb.app.backend import embed_client, open_store, read_config
from kb.app.ingest import run
from kb.content import obsidian
from kb.content.chunking import chunk_note, embedding_text, note_title
from kb.content.notes import NoteError, parse_note, read_note
from kb.core import properties
from kb.core import schema as kb_schema
from kb.core.errors import NoteNotFound
from kb.core.settings import Settings
from kb.ingest.progress import format_summary
from kb.search import SearchRequest, search
from kb.search.filters import Filters
from kb.search.query import tag_usage
from kb.search.read import read_item
from kb.search.related import related

VAULT = REPO_ROOT / "tests" / "obsidian_vault"
ALPHA = "vault/Projects/Alpha.md"
PRIYA = "vault/People/Priya.md"
ADR = "vault/Decisions/ADR-7 Postgres.md"
KICKOFF = "vault/Meetings/2024-03-04 Kickoff.md"
DAILY = "vault/Daily/2024-03-05.md"
BOARD = "vault/Board.canvas"


def note(text: str, source: str = "note.md", **options):
    return parse_note(text, Path(source), source, **options)


def alpha():
    return read_note(VAULT / "Projects/Alpha.md", ALPHA, max_bytes=10**6)


# --- reading a note ------------------------------------------------------------------------


def test_inline_tags_are_read_outside_code_and_comments_and_nested_ones_bring_their_parents():
    found = note(
        "# T\n\nSee #Idea and (#decision), #project/alpha/design; not C# or #123 or url/#x.\n"
        "`#code` %%#hidden%%\n```\n#fenced\n```\n",
        markdown=True,
    )
    assert found.tags == (
        "idea", "decision", "project", "project/alpha", "project/alpha/design",
    )  # fmt: skip
    assert note("tags: #x\n", "plain.txt", markdown=False).tags == ()


def test_code_fenced_inside_a_callout_gives_no_tags_and_the_callout_after_it_does():
    found = note(
        "# T\n\n> [!note] Colours\n> ```css\n> a { color: #ff0000; }\n> #fenced\n> ```\n"
        "> #palette after the fence\n\n>> ~~~\n>> #deeper\n> ~~~\n>> #still-code\n>> ~~~\n"
        "#outside\n",
        markdown=True,
    )
    assert found.tags == ("palette", "outside")


def test_wikilinks_and_embeds_embed_their_shown_text_and_markdown_links_are_links_too():
    text = (
        "[[Note]], [[Folder/Other.md|shown]], [[Note#Risks]], [[Note#^block]], "
        "[[Table\\|alias]], ![[image.png|300]], ![[Other#Part]], [doc](../a%20b.md#x), "
        "[web](https://example.org/#y), [[#Local heading]]"
    )
    syntax = obsidian.scan(text)
    assert obsidian.apply(text, syntax.edits) == (  # a Markdown link's path words stay
        "Note, shown, Note > Risks, Note, alias, image.png, Other > Part, [doc](../a%20b.md#x), "
        "[web](https://example.org/#y), Local heading"
    )
    assert [(link.target, link.heading, link.embed) for link in syntax.links] == [
        ("Note", "", False), ("Folder/Other.md", "", False), ("Note", "Risks", False),
        ("Note", "^block", False), ("Table", "", False), ("image.png", "", True),
        ("Other", "Part", True), ("../a b.md", "x", False),
    ]  # fmt: skip


def test_comments_are_never_embedded_and_an_unclosed_one_hides_the_rest():
    assert obsidian.clean("keep %%drop%% this") == "keep  this"
    assert obsidian.clean("a\n%%\nsecret\nlines\n%%\nb\n") == "a\n\nb\n"
    assert obsidian.clean("`%%` is code %%but this%% not") == "`%%` is code  not"
    assert obsidian.clean("before %% never closed\nstill hidden") == "before "


def test_callouts_highlights_tasks_and_block_ids_are_clean_for_embedding_and_kept_for_reading():
    text = (
        "# Risks\n\n> [!warning]- Rebuild time\n> It took 47 minutes. ^rebuild\n\n> [!tip]\n"
        "> Snapshot.\n\n- [ ] Reconcile ==one month==\n- [x] Shadow-write\n1. [ ] Third\n"
    )
    parsed = note(text)
    (chunk,) = chunk_note(parsed)
    assert chunk.text == text.strip()  # stored and shown as the file has it
    assert chunk.embedded == (
        "# Risks\n\n> Rebuild time\n> It took 47 minutes. \n\n> Tip\n> Snapshot.\n\n"
        "- Reconcile one month\n- Shadow-write\n1. Third"
    )


def test_the_embedded_text_of_a_vault_note_shows_links_as_their_text_and_no_comment():
    parsed = alpha()
    title = note_title(parsed)
    embedded = "\n".join(embedding_text(c, parsed, title) for c in chunk_note(parsed))
    stored = "\n".join(c.text for c in chunk_note(parsed))
    assert "Billing Ledger, Ledger" in embedded  # the aliases find the note
    assert "event-sourced ledger" in embedded  # `description` is its topic
    assert "Decided in ADR-7, raised at 2024-03-04 Kickoff > Pain points" in embedded
    for gone in ("[[Priya", "%%", "Marta", "landlord", "[!warning]", "^rebuild", "- [ ]", "=="):
        assert gone not in embedded, gone
    # stored as written, but for its comments: Obsidian never shows them (issue 46)
    assert "Marta" not in stored and "%%" not in stored and "[[Priya]]" in stored
    assert "[[Not a link]]" in embedded  # code is embedded as it is


def test_aliases_description_and_created_fill_the_fields_and_a_daily_note_is_dated_by_its_name():
    parsed = alpha()
    assert parsed.aliases == ("Billing Ledger", "Ledger")
    assert parsed.topic == "Moving billing from a nightly batch to an event-sourced ledger."
    assert parsed.document_date == "2024-02-12"
    assert parsed.tags == ("project", "project/alpha", "work", "decision")
    daily = read_note(VAULT / "Daily/2024-03-05.md", DAILY, max_bytes=10**6)
    assert daily.document_date == "2024-03-05"
    kickoff = read_note(VAULT / "Meetings/2024-03-04 Kickoff.md", KICKOFF, max_bytes=10**6)
    assert kickoff.document_date == "2024-03-04"
    assert note("---\naliases: PR, Pri\n---\nx\n").aliases == ("PR", "Pri")


def test_a_value_under_an_obsidian_key_that_cannot_be_used_is_a_notice_not_a_failure():
    template = read_note(VAULT / "Templates/Daily.md", "vault/Templates/Daily.md", max_bytes=10**6)
    assert template.document_date is None
    assert template.notice == "created: '{{date}}' is not a date; the note is not dated by it"
    with pytest.raises(NoteError, match="document_date 'someday' is not a date"):
        note("---\ndocument_date: someday\ncreated: 2024-01-01\n---\nx\n")
    with pytest.raises(NoteError, match="topic must be one sentence"):
        note("---\ntopic: [a, b]\n---\nx\n")


def test_note_properties_maps_other_keys_and_refuses_an_unknown_field():
    mapping = properties.parse("topic=summary,document_date=day")
    assert mapping["topic"] == ("summary",) and mapping["aliases"] == ("aliases", "alias")
    parsed = note("---\nsummary: Short.\ndescription: Not this.\nday: 2024-05-06\n---\nx\n",
                  properties=mapping)  # fmt: skip
    assert (parsed.topic, parsed.document_date) == ("Short.", "2024-05-06")
    with pytest.raises(ValueError, match="NOTE_PROPERTIES: 'title=name' is not field=key"):
        Settings(_env_file=None, NOTE_PROPERTIES="title=name")
    assert Settings(_env_file=None).note_properties == properties.DEFAULTS


def test_links_resolve_like_obsidian_by_shortest_path_case_insensitively_then_by_alias():
    vault = obsidian.Vault(
        {
            "v/Inbox/Notes.md": [], "v/Archive/Notes.md": [], "v/Projects/Alpha.md": ["Ledger"],
            "v/Board.canvas": [], "v/Node.js.md": [], "v/Ideas.md": [], "v/Old/Ideas.md": [],
        },
        prefix="v/",
    )  # fmt: skip

    def to(target: str, source: str = "v/People/Priya.md") -> str | None:
        return vault.resolve(obsidian.Link(target), source)

    assert to("alpha") == "v/Projects/Alpha.md"
    assert to("PROJECTS/ALPHA.md") == "v/Projects/Alpha.md"
    assert to("Notes") == "v/Inbox/Notes.md"  # two notes of that name: the shortest path
    assert to("Notes", "v/Archive/Reading.md") == "v/Archive/Notes.md"  # the one beside it
    assert to("Archive/Notes") == "v/Archive/Notes.md"
    assert to("Ideas", "v/Old/x.md") == "v/Ideas.md"  # the path as written comes first
    assert to("../Projects/Alpha.md", "v/People/Priya.md") == "v/Projects/Alpha.md"
    assert to("ledger") == "v/Projects/Alpha.md"  # an alias, when no file has the name
    assert to("Board.canvas") == "v/Board.canvas" and to("Node.js") == "v/Node.js.md"
    resolved, unresolved = obsidian.resolve_all(
        vault, [obsidian.Link(t) for t in ("Alpha", "Budget 2025", "diagram.png", "Alpha")],
        "v/People/Priya.md",
    )  # fmt: skip
    assert (resolved, unresolved) == (["v/Projects/Alpha.md"], ["Budget 2025"])


def test_a_canvas_indexes_its_text_nodes_with_a_locator_and_links_its_file_nodes():
    board = read_note(VAULT / "Board.canvas", BOARD, max_bytes=10**6)
    chunks = chunk_note(board)
    assert [c.locator for c in chunks] == [
        "Billing ledger > node n1", "node n3", "cards", "connections",
    ]  # fmt: skip
    assert chunks[0].heading_path == ("Billing ledger",)
    assert "approved by Priya" in (chunks[0].embedded or "")
    assert "Commands -> append -> Alpha" in chunks[-1].text
    assert [link.target for link in board.links] == ["Projects/Alpha.md", "Priya"]
    assert board.tags == ("board",)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{not json", "not a valid canvas (invalid JSON at line 1"),
        (b'{"edges": []}', "not a valid canvas (no 'nodes' list)"),
        (b'{"nodes": [{"id": "g", "type": "group", "label": "x"}]}', "no text, file or link"),
    ],
)
def test_a_broken_canvas_fails_by_name_with_the_reason(tmp_path: Path, data: bytes, reason: str):
    with pytest.raises(NoteError, match=re.escape(reason)):
        read_note(write(tmp_path / "b.canvas", data), "b.canvas", max_bytes=10**6)


# --- the vault indexed -----------------------------------------------------------------------


def vault_settings(root: Path, embed_url: str, **overrides: object) -> Settings:
    vault = root / "vault"
    if not vault.exists():
        shutil.copytree(VAULT, vault)
    return make_settings(root, embed_url, NOTE_FOLDERS=f"vault={vault}", **overrides)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, embedder_transport) -> Settings:
    """tests/obsidian_vault synced as the NOTE_FOLDERS folder `vault`; the store closed again."""
    settings = vault_settings(tmp_path_factory.mktemp("obsidian"), IN_PROCESS_EMBED_URL)
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        summary = run(settings, client, store)
    assert not summary.failed, summary.failed
    assert summary.notices[0].reason.startswith("created: '{{date}}'")
    assert summary.unresolved == {ALPHA: ["Budget 2025"]}
    return settings


@pytest.fixture
def vault_store(indexed: Settings) -> Iterator:
    with open_store(indexed) as store:
        yield store


def first_payload(store, source: str) -> dict:
    return next(p for _, p in store.payloads(source) if p["chunk_index"] == 0)


def test_a_vault_is_indexed_with_tags_aliases_dates_links_and_unresolved_links(vault_store):
    payload = first_payload(vault_store, ALPHA)
    assert payload["tags"] == ["project", "project/alpha", "work", "decision"]
    assert payload["aliases"] == ["Billing Ledger", "Ledger"]
    assert payload["document_date"] == "2024-02-12"
    assert payload["links"] == [PRIYA, ADR, KICKOFF, BOARD]
    assert payload["unresolved_links"] == ["Budget 2025"]
    assert first_payload(vault_store, PRIYA)["links"] == [ALPHA, "vault/Inbox/Notes.md"]
    assert first_payload(vault_store, "vault/Index.md")["links"] == ["vault/Archive/Notes.md"]
    assert first_payload(vault_store, "vault/Archive/Reading.md")["links"] == [
        "vault/Archive/Notes.md"
    ]
    assert first_payload(vault_store, ADR)["links"] == [ALPHA]  # frontmatter and body, once
    assert first_payload(vault_store, KICKOFF)["document_date"] == "2024-03-04"
    board = [p for _, p in vault_store.payloads(BOARD)]
    assert {p["locator"] for p in board} == {
        "Billing ledger > node n1", "node n3", "cards", "connections",
    }  # fmt: skip
    assert board[0]["links"] == [ALPHA, PRIYA]


def test_a_tag_filter_on_a_parent_finds_the_notes_of_its_children(
    indexed, vault_store, embedder_transport
):
    with embed_client(indexed, transport=embedder_transport) as client:
        found = search(
            kb_search_for(vault_store, client),
            SearchRequest("what did I do", 10, filters=Filters(tags=["Area"])),
        )
    assert {h.source for h in found.hits} == {DAILY, "vault/Health/Sleep.md"}
    hit = next(h for h in found.hits if h.source == DAILY)
    assert hit.tags == ["area/health/running"]  # its parents are implied


def kb_search_for(store, client):
    from kb.search import Searcher

    return Searcher(store, client)


def test_list_tags_names_each_nested_tags_parent_and_a_parent_counts_its_children(vault_store):
    usage = {u.tag: u for u in tag_usage(vault_store)}
    assert (usage["area"].notes, usage["area"].parent) == (2, None)
    assert (usage["area/health"].notes, usage["area/health"].parent) == (2, "area")
    assert (usage["area/health/sleep"].notes, usage["area/health/sleep"].parent) == (
        1, "area/health",
    )  # fmt: skip
    assert usage["decision"].notes == 2 and usage["people/work"].parent == "people"


def test_related_notes_lists_backlinks_links_and_unlinked_neighbours_with_why(vault_store):
    found = related(vault_store, ALPHA, k=3)
    why = {n.source: n.why for n in found.notes}
    assert {s: w for s, w in why.items() if w != "similar"} == {
        PRIYA: "both", ADR: "both", BOARD: "both", DAILY: "backlink", KICKOFF: "link",
    }  # fmt: skip
    similar = [n for n in found.notes if n.why == "similar"]
    assert len(similar) == 3 and all(n.score is not None for n in similar)
    assert not {n.source for n in similar} & {ALPHA, PRIYA, ADR, BOARD, DAILY, KICKOFF}
    assert (found.links_in, found.links_out, found.unresolved) == (4, 4, ["Budget 2025"])
    assert found.aliases == ["Billing Ledger", "Ledger"]
    with pytest.raises(NoteNotFound):
        related(vault_store, "vault/Nope.md")


def test_status_lists_the_links_to_notes_that_are_not_indexed(indexed, vault_store):
    report = kb_status.status(indexed, vault_store)
    assert report.unresolved_links == 1
    assert [(u.note, u.origin, u.target) for u in report.unresolved] == [
        (ALPHA, "vault", "Budget 2025")
    ]


def test_read_note_and_search_results_carry_aliases_and_link_counts(
    indexed, vault_store, embedder_transport
):
    passage = read_item(read_config(indexed), [vault_store], ALPHA, 1, 5)
    assert (passage.aliases, passage.links_out, passage.links_in) == (
        ["Billing Ledger", "Ledger"], 4, 4,
    )  # fmt: skip
    with embed_client(indexed, transport=embedder_transport) as client:
        found = search(kb_search_for(vault_store, client), SearchRequest("Billing Ledger", 5))
    top = next(h for h in found.hits if h.source == ALPHA)
    assert (top.source, top.aliases, top.links_out, top.links_in) == (
        ALPHA, ["Billing Ledger", "Ledger"], 4, 4,
    )  # fmt: skip


def test_a_note_written_later_resolves_the_links_to_it_without_embedding_again(
    tmp_path: Path, embedder_transport
):
    settings = vault_settings(tmp_path, IN_PROCESS_EMBED_URL)
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        run(settings, client, store)
        again = run(settings, client, store)
        assert again.written == 0 and len(again.unchanged) == 12  # nothing changed
        write(tmp_path / "vault" / "Budget 2025.md", "# Budget 2025\n\nRent, food, travel.\n")
        calls = client.calls
        summary = run(settings, client, store)
        assert summary.added == ["vault/Budget 2025.md"] and summary.replaced == [ALPHA]
        assert client.calls == calls + 1  # the new note only: Alpha's vectors are cached
        payload = first_payload(store, ALPHA)
        assert payload["unresolved_links"] == [] and "vault/Budget 2025.md" in payload["links"]
        assert not summary.unresolved


def test_a_collection_of_the_older_layout_is_rewritten_with_its_vectors_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder_transport
):
    settings = vault_settings(tmp_path, IN_PROCESS_EMBED_URL)
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        monkeypatch.setattr(kb_schema, "SCHEMA_VERSION", 3)
        run(settings, client, store)
        monkeypatch.setattr(kb_schema, "SCHEMA_VERSION", 4)
        calls = client.calls
        summary = run(settings, client, store)
    assert len(summary.replaced) == 12 and client.calls == calls
    assert summary.embedded_cached == summary.chunks


def test_inbox_notes_links_resolve_against_the_notes_stored_before(
    tmp_path: Path, embedder_transport
):
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL)
    write(settings.NOTES_DIR / "people/Priya.md", "# Priya\n\nRuns the one-on-ones.\n")
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        run(settings, client, store)
        write(settings.NOTES_DIR / "log.md", "# Log\n\nMet [[priya]] and [[Nobody]].\n")
        run(settings, client, store)
        payload = first_payload(store, "log.md")
    assert (payload["links"], payload["unresolved_links"]) == (["people/Priya.md"], ["Nobody"])


def test_query_py_related_prints_each_note_with_why(indexed, embedder_url):
    env = script_env(indexed, EMBED_URL=embedder_url, NOTE_FOLDERS=indexed.NOTE_FOLDERS)
    done = run_script("query.py", "--related", ALPHA, "-k", "2", env=env, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"{ALPHA}: Alpha  (also: Billing Ledger, Ledger)"
    assert f"  linked both ways  {PRIYA}  Priya" in lines
    assert f"  links here        {DAILY}  2024 03 05" in lines
    assert "  unresolved: [[Budget 2025]]" in lines
    assert sum(line.startswith("  similar 0.") for line in lines) == 2
    as_json = run_script("query.py", "--related", ALPHA, "--json", env=env, cwd=REPO_ROOT)
    assert json.loads(as_json.stdout)["links_in"] == 4


def test_related_notes_status_and_list_tags_through_mcp_and_the_dashboard(
    indexed: Settings, tmp_path: Path, embedder_transport
):
    qdrant = tmp_path / "qdrant"
    shutil.copytree(indexed.QDRANT_PATH, qdrant)
    settings = indexed.model_copy(update={"QDRANT_PATH": str(qdrant), "MCP_PORT": free_port()})
    with serve_in_process(settings, transport=embedder_transport) as server:
        answer = call_tool(server.url, "related_notes", {"source": ALPHA, "k": 2})
        assert not answer.is_error
        notes = tool_answer(answer)["notes"]
        assert {n["source"]: n["why"] for n in notes}[DAILY] == "backlink"
        assert sum(n["why"] == "similar" for n in notes) == 2
        report = tool_answer(call_tool(server.url, "status"))
        assert report["unresolved"] == [{"note": ALPHA, "origin": "vault", "target": "Budget 2025"}]
        tags = tool_answer(call_tool(server.url, "list_tags"))["tags"]
        assert {"tag": "area/health", "parent": "area", "chunks": 2, "notes": 2} in tags
        read = call_tool(server.url, "read_note", {"source": ALPHA, "lines": 3})
        assert tool_answer(read)["links_in"] == 4
        missing = call_tool(server.url, "related_notes", {"source": "vault/Nope.md"})
        assert missing.is_error
        page = httpx.get(server.base + "/preview", params={"source": ALPHA}).text
        assert 'id="related"' in page and "linked both ways" in page and "[[Budget 2025]]" in page
        status = httpx.get(server.base + "/").text
        assert 'id="unresolved"' in status and "[[Budget 2025]]" in status


def test_inline_and_nested_tags_and_mapped_keys_make_a_note_private_at_ingest_and_at_read(
    tmp_path: Path, embedder_transport
):
    settings = make_settings(
        tmp_path,
        IN_PROCESS_EMBED_URL,
        PRIVATE_TAGS="secret,health",
        NOTE_PROPERTIES="tags=keywords",
    )
    write(settings.NOTES_DIR / "a.md", "---\nkeywords: [Secret]\n---\n# A\n\nPlans.\n")
    write(settings.NOTES_DIR / "b.md", "# B\n\nSlept badly again. #health/sleep\n")
    write(settings.NOTES_DIR / "c.md", "# C\n\nA walk by the river.\n")
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        summary = run(settings, client, store)
        assert sorted(summary.private) == ["a.md", "b.md"] and summary.added == ["c.md"]
        write(settings.NOTES_DIR / "ingested" / "c.md", "# C\n\nA walk by the river. #health\n")
        with pytest.raises(NoteNotFound, match="private now"):
            read_item(read_config(settings), [store], "c.md")


def test_the_ingest_report_names_the_notes_whose_links_name_notes_not_indexed(
    tmp_path: Path, embedder_transport
):
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL)
    write(settings.NOTES_DIR / "a.md", "# A\n\nSee [[Nowhere]], [[Gone|it]] and [[b]].\n")
    write(settings.NOTES_DIR / "b.md", "# B\n\nA plain note.\n")
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        summary = run(settings, client, store)
    assert summary.unresolved == {"a.md": ["Nowhere", "Gone"]}  # in the order written
    assert (
        "  2 links name notes that are not indexed, in 1 notes (the status tool lists them): a.md"
        in format_summary(summary).splitlines()
    )
