"""Notion exports as a source (NOTION, kb.sources.notion): a "Markdown & CSV" export made here
(pages and folders named with Notion's 32-hex ids, URL-encoded links between pages, a database's
CSV with its `_all.csv`, its rows' pages), as a folder and zipped, ingested into embedded Qdrant
through the in-process embedder (MiniLM) and searched through the MCP tools: clean titles and
names, backlinks and related notes between linked pages, the database's rows by `row N`."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import free_port
from ingest_fixtures import make_settings
from mcp_fixtures import call_tool, results, serve_in_process, tool_answer

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.core.errors import ConfigError
from kb.core.settings import Settings
from kb.sources import notion

PLAN, SOIL, SEEDS, TOMATO, TRIP = (f"{n:x}" * 32 for n in (10, 11, 12, 13, 14))
PLAN_DIR = f"Garden plan {PLAN}"


def export_files() -> dict[str, bytes]:
    """A small workspace as Notion exports it: a page with a sub-page and a database (its view's
    CSV, its `_all.csv`, a row's page), an unrelated page, and one page too large to read."""
    enc = PLAN_DIR.replace(" ", "%20")
    seeds_csv = "Name,Supplier,Quantity\nHeirloom tomato,Baker Creek,3\n"
    return {
        f"{PLAN_DIR}.md": (
            "# Garden plan\n\nStatus: Active\n\nWe rotate the raised beds each spring so the "
            "tomatoes never grow where they grew last year. See "
            f"[Soil notes]({enc}/Soil%20notes%20{SOIL}.md) and the "
            f"[Seed orders]({enc}/Seed%20orders%20{SEEDS}.csv).\n"
        ).encode(),
        f"{PLAN_DIR}/Soil notes {SOIL}.md": (
            "# Soil notes\n\nMix two buckets of compost and a handful of bone meal into every bed "
            f"before planting; the pH stays near 6.5. Back to [Garden plan](../{enc}.md).\n"
        ).encode(),
        f"{PLAN_DIR}/Seed orders {SEEDS}.csv": ("\ufeff" + seeds_csv).encode(),
        f"{PLAN_DIR}/Seed orders {SEEDS}_all.csv": (
            "\ufeff" + seeds_csv + "Butternut squash,Johnny's Selected Seeds,2\n"
            "Purple sprouting broccoli,Real Seeds,5\n"
        ).encode(),
        f"{PLAN_DIR}/Seed orders {SEEDS}/Heirloom tomato {TOMATO}.md": (
            b"# Heirloom tomato\n\nSupplier: Baker Creek\nQuantity: 3\n\nBrandywine, started "
            b"indoors under the grow light in March.\n"
        ),
        f"Hiking trip {TRIP}.md": (
            b"# Hiking trip\n\nThree nights in the Dolomites, hut to hut, with crampons.\n"
        ),
        f"Hiking trip {TRIP}/huge {'f' * 32}.md": b"# Huge\n\n" + b"filler words " * 5000,
        f"{PLAN_DIR}/bed layout.png": b"\x89PNG\r\n\x1a\n not read",
    }


def write_export(root: Path) -> tuple[Path, Path]:
    """The export unpacked into a folder, and zipped as Notion hands it out."""
    folder = root / "Garden workspace"
    zipped = root / "Export-5f3c1e2a-workspace.zip"
    root.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in export_files().items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
            archive.writestr(name, data)
    return folder, zipped


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder_transport) -> tuple[Settings, dict]:
    root = tmp_path_factory.mktemp("notion")
    folder, zipped = write_export(root / "exports")
    settings = make_settings(
        root, IN_PROCESS_EMBED_URL, NOTION=f"garden={folder},{zipped}", NOTE_MAX_BYTES=20_000
    )
    with open_store(settings) as store, embed_client(settings, transport=embedder_transport) as c:
        summary = run(settings, c, store)
        again = run(settings, c, store)
    return settings, {"summary": summary, "again": again, "transport": embedder_transport}


def served(settings: Settings, tmp_path: Path) -> Settings:
    copy = tmp_path / "qdrant"
    shutil.copytree(settings.QDRANT_PATH, copy)
    return settings.model_copy(update={"QDRANT_PATH": str(copy), "MCP_PORT": free_port()})


def test_pages_folders_and_databases_are_named_without_notions_ids(corpus):
    _, found = corpus
    summary = found["summary"]
    for export in ("garden", "Export-5f3c1e2a-workspace"):  # the folder's name, the zip's
        assert {s for s in summary.added if s.startswith(f"notion/{export}/")} == {
            f"notion/{export}/{name}"
            for name in ("Garden plan.md", "Garden plan/Soil notes.md", "Hiking trip.md",
                         "Garden plan/Seed orders.csv",
                         "Garden plan/Seed orders/Heirloom tomato.md")
        }  # fmt: skip
    failed = {f.source: f.reason for f in summary.failed}  # the huge page fails alone, by name
    assert set(failed) == {f"notion/{e}/Hiking trip/huge.md"
                           for e in ("garden", "Export-5f3c1e2a-workspace")}  # fmt: skip
    assert all("over 20000 bytes (NOTE_MAX_BYTES)" in r for r in failed.values())
    assert not summary.unresolved


def test_an_export_synced_again_unchanged_embeds_nothing_and_deletes_nothing(corpus):
    _, found = corpus
    again = found["again"]
    assert sorted(again.unchanged) == sorted(found["summary"].added)
    assert not (again.added or again.replaced or again.deleted or again.removed)
    assert again.written == 0


def test_pages_are_found_by_their_clean_titles_and_linked_pages_are_related(corpus, tmp_path):
    settings, found = corpus
    with serve_in_process(served(settings, tmp_path), transport=found["transport"]) as server:
        query = {"query": "rotate the raised beds so tomatoes move", "k": 2}
        hits = results(call_tool(server.url, "search_notes", query))
        assert {h["source"] for h in hits} == {
            "notion/garden/Garden plan.md",
            "notion/Export-5f3c1e2a-workspace/Garden plan.md",
        }
        assert {h["title"] for h in hits} == {"Garden plan"}
        plan = "notion/Export-5f3c1e2a-workspace/Garden plan.md"
        related = tool_answer(call_tool(server.url, "related_notes", {"source": plan, "k": 0}))
        why = {n["source"]: n["why"] for n in related["notes"]}
        zipped = "notion/Export-5f3c1e2a-workspace/Garden plan"
        assert why == {f"{zipped}/Soil notes.md": "both", f"{zipped}/Seed orders.csv": "link"}
        assert related["links_in"] == 1 and related["unresolved"] == []
        text = tool_answer(call_tool(server.url, "read_note", {"source": plan}))["text"]
        assert "[Soil notes](<./Garden plan/Soil notes.md>)" in text and SOIL not in text


def test_a_databases_rows_are_found_as_table_rows(corpus, tmp_path):
    settings, found = corpus
    with serve_in_process(served(settings, tmp_path), transport=found["transport"]) as server:
        query = {"query": "butternut squash seeds from Johnny's", "k": 2}
        hits = results(call_tool(server.url, "search_notes", query))
        assert {h["source"] for h in hits} == {
            "notion/garden/Garden plan/Seed orders.csv",
            "notion/Export-5f3c1e2a-workspace/Garden plan/Seed orders.csv",
        }
        assert {h["locator"] for h in hits} == {"row 3"}  # from the _all.csv: every row
        unseen = {"source": "notion/garden/Nowhere.md"}
        why = tool_answer(call_tool(server.url, "why_not_found", unseen))
        assert why["state"] == "never_seen"
        assert "no page of the NOTION exports is named so" in str(why["story"])


def test_two_pages_of_one_folder_with_the_same_title_keep_a_short_id():
    names = notion.clean_names([f"Untitled {PLAN}.md", f"untitled {SOIL}.md", f"{PLAN_DIR}.md"])
    assert names == {
        f"Untitled {PLAN}.md": "Untitled aaaaaaaa.md",
        f"untitled {SOIL}.md": "untitled bbbbbbbb.md",
        f"{PLAN_DIR}.md": "Garden plan.md",
    }


def test_a_zip_over_the_caps_is_refused_by_name_and_its_pages_are_kept(tmp_path, monkeypatch):
    _, zipped = write_export(tmp_path)
    source = notion.NotionSource([notion.ZipExport("work", zipped)], (".md", ".csv"))
    monkeypatch.setattr(notion, "MAX_TOTAL_BYTES", 1000)
    [failure] = source.listing(everything=True).failed
    assert failure.source == "notion/work"
    assert str(zipped) in failure.reason and "bytes uncompressed" in failure.reason
    assert source.holds("notion/work/Garden plan.md")  # not soft-deleted for a refused export
    monkeypatch.setattr(notion, "MAX_MEMBERS", 3)
    [failure] = source.listing(everything=True).failed
    assert "over 3 files" in failure.reason
    not_zip = tmp_path / "notes.zip"
    not_zip.write_bytes(b"not a zip at all")
    source = notion.NotionSource([notion.ZipExport("bad", not_zip)], (".md",))
    [failure] = source.listing(everything=True).failed
    assert "not a readable zip" in failure.reason


def test_a_large_export_in_part_zips_is_read_as_one_tree_with_links_across_parts(tmp_path):
    files = export_files()
    outer = tmp_path / "Export-77aa.zip"
    with zipfile.ZipFile(outer, "w", zipfile.ZIP_DEFLATED) as archive:
        for number, names in enumerate((list(files)[:3], list(files)[3:]), 1):
            part = tmp_path / f"Export-77aa-Part-{number}.zip"
            with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as inner:
                for name in names:
                    inner.writestr(name, files[name])
            archive.write(part, part.name)
    source = notion.NotionSource([notion.ZipExport("big", outer)], (".md", ".csv"))
    listing = source.listing(everything=True)
    items = {i.source: i for i in listing.items}
    assert set(items) == {
        f"notion/big/{name}"
        for name in ("Garden plan.md", "Garden plan/Soil notes.md", "Hiking trip.md",
                     "Garden plan/Seed orders.csv", "Garden plan/Seed orders/Heirloom tomato.md",
                     "Hiking trip/huge.md")
    }  # fmt: skip
    plan = source.read(items["notion/big/Garden plan.md"], max_bytes=100_000)  # in part 1
    assert [link.target for link in plan.links] == [
        "./Garden plan/Soil notes.md",  # in part 1
        "./Garden plan/Seed orders.csv",  # the _all.csv, in part 2
    ]
    rows = source.read(items["notion/big/Garden plan/Seed orders.csv"], max_bytes=100_000)
    assert rows.kind == "table" and "Butternut squash" in rows.text
    source.finish()


def test_a_broken_member_of_a_zip_fails_alone(tmp_path):
    zipped = tmp_path / "export.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(f"Good {PLAN}.md", "# Good\n\nA page that reads.\n")
        archive.writestr(f"Bad {SOIL}.md", "# Bad\n\n" + "a page broken in the zip " * 50)
    data = bytearray(zipped.read_bytes())
    start = data.index(b"Bad ") + len(f"Bad {SOIL}.md")  # its compressed bytes, after its name
    data[start + 100 : start + 130] = b"\xff" * 30  # its CRC no longer matches
    zipped.write_bytes(bytes(data))
    source = notion.NotionSource([notion.ZipExport("z", zipped)], (".md",))
    items = {i.source: i for i in source.listing(everything=True).items}
    assert set(items) == {"notion/z/Good.md", "notion/z/Bad.md"}
    assert source.read(items["notion/z/Good.md"], max_bytes=10_000).text.startswith("# Good")
    with pytest.raises(notion.NoteError, match="cannot read it from the zip"):
        source.read(items["notion/z/Bad.md"], max_bytes=10_000)
    source.finish()


def test_notion_names_a_missing_export_and_refuses_a_folder_named_notion(tmp_path):
    missing = make_settings(tmp_path, NOTION=str(tmp_path / "gone.zip"))
    with pytest.raises(ConfigError, match=r"NOTION: gone=.*does not exist"):
        notion.notion_source(missing)
    (tmp_path / "vault").mkdir()
    clash = make_settings(tmp_path, NOTION=str(tmp_path / "vault"),
                          NOTE_FOLDERS=f"notion={tmp_path / 'vault'}")  # fmt: skip
    with pytest.raises(ConfigError, match="a NOTE_FOLDERS folder already uses that name"):
        notion.notion_source(clash)
