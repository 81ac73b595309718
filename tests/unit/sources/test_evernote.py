"""Evernote exports as a source (EVERNOTE, kb.sources.evernote): an `.enex` written in the
fixture (three notes with tags and dates, a PDF made with fpdf2, an image, a web clip, and a
broken note), ingested into embedded Qdrant with the in-process embedder and searched through
the MCP tools with the `note` kind, the path, tag and date filters and the PDF's page locator;
XML bombs, external entities and a file cut halfway read alone."""

from __future__ import annotations

import base64
import hashlib
import shutil
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from format_files import pdf_bytes, png
from helpers import free_port
from ingest_fixtures import make_settings
from mcp_fixtures import call_tool, results, serve_in_process, tool_answer

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.content import ocr
from kb.core.settings import Settings
from kb.sources import evernote
from kb.sources.evernote import Entry, EvernoteSource, Resource, note_of

HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<!DOCTYPE en-export SYSTEM "http://xml.evernote.com/pub/evernote-export4.dtd">\n'
    '<en-export export-date="20250301T093000Z" application="Evernote" version="10.76.2">\n'
)
BRINE = "Dissolve sea salt in the brine until an egg floats, then soak the napa cabbage overnight."


def enml(body: str) -> str:
    return (
        '<![CDATA[<?xml version="1.0" encoding="UTF-8" standalone="no"?>'
        '<!DOCTYPE en-note SYSTEM "http://xml.evernote.com/pub/enml2.dtd">'
        f"<en-note>{body}</en-note>]]>"
    )


def recognition(*items: tuple[str, ...]) -> str:
    """Evernote's recoIndex: per item, candidate words, the first the likeliest."""
    body = "".join(
        "<item>" + "".join(f'<t w="{90 - 10 * i}">{w}</t>' for i, w in enumerate(words)) + "</item>"
        for words in items
    )
    return (
        '<recognition><![CDATA[<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE recoIndex '
        'PUBLIC "SYSTEM" "http://xml.evernote.com/pub/recoIndex.dtd"><recoIndex objType="image">'
        f"{body}</recoIndex>]]></recognition>"
    )


def resource(data: bytes, mime: str, name: str, recognised: str = "") -> tuple[str, str]:
    """(the <en-media> that places it in the body, the <resource> element)."""
    digest = hashlib.md5(data, usedforsecurity=False).hexdigest()
    encoded = base64.encodebytes(data).decode()
    element = (
        f'<resource><data encoding="base64">\n{encoded}</data><mime>{mime}</mime>{recognised}'
        f"<resource-attributes><file-name>{escape(name)}</file-name></resource-attributes>"
        "</resource>"
    )
    return f'<en-media hash="{digest}" type="{mime}"/>', element


def note(title: str, body: str, *, tags: tuple[str, ...] = (), resources: tuple[str, ...] = (),
         created: str = "", updated: str = "", attributes: str = "") -> str:  # fmt: skip
    return (
        f"<note><title>{escape(title)}</title>"
        + (f"<created>{created}</created>" if created else "")
        + (f"<updated>{updated}</updated>" if updated else "")
        + "".join(f"<tag>{escape(t)}</tag>" for t in tags)
        + f"<note-attributes>{attributes}</note-attributes>"
        + f"<content>{enml(body)}</content>"
        + "".join(resources)
        + "</note>\n"
    )


def write_export(path: Path) -> Path:
    """A notebook export as Evernote writes it: a recipe with a two-page PDF, a whiteboard photo,
    a web clip, and a note whose resource is not base64 (cut by a broken sync)."""
    pdf = pdf_bytes(["Shopping list: gochugaru, fish sauce, garlic, ginger.",
                     "Ferment the jars at room temperature for two days, then refrigerate "
                     "them; the kimchi turns sour after three weeks."])  # fmt: skip
    pdf_media, pdf_resource = resource(pdf, "application/pdf", "fermentation.pdf")
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64  # its bytes matter to no reader yet
    words = recognition(("ACTION",), ("ITEMS",), ("rotate", "rorate"), ("the",), ("on-call",),
                        ("pager", "paper"), ("weekly",))  # fmt: skip
    png_media, png_resource = resource(png, "image/png", "whiteboard.png", words)
    notes = [
        note("Kimchi", f"<h2>Brine</h2><div>{BRINE}</div><div><en-todo checked=\"true\"/>buy "
             f"cabbage</div><div>{pdf_media}</div>", tags=("Recipes", "Korean Cuisine"),
             created="20240301T101500Z", updated="20240305T080000Z",
             resources=(pdf_resource,)),
        note("Retro whiteboard", "<div>Sprint retro: the deploy pipeline is too slow; pair on "
             f"flaky tests.&nbsp;</div>{png_media}<en-crypt cipher=\"AES\">U2VjcmV0IQ==</en-crypt>",
             tags=("work",), created="20250110T160000Z", resources=(png_resource,)),
        note("Glacier hike permits", "<h1>Permits</h1><ul><li>Apply for the glacier hiking "
             "permit at the ranger station</li><li>Crampons and ice axe</li></ul>",
             tags=("travel",), created="20230615T070000Z",
             attributes="<source-url>https://example.org/glacier</source-url>"),
        note("Door codes", "<div>garage 4711</div>", tags=("Private",),
             created="20240202T000000Z"),
        note("Broken scan", "<div>receipt</div>", tags=("receipts",),
             created="20240101T000000Z",
             resources=("<resource><data encoding=\"base64\">!!not base64!!</data>"
                        "<mime>application/pdf</mime></resource>",)),
    ]  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEAD + "".join(notes) + "</en-export>\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder_transport) -> tuple[Settings, dict]:
    root = tmp_path_factory.mktemp("evernote")
    export = write_export(root / "exports" / "Cooking and more.enex")
    settings = make_settings(root, IN_PROCESS_EMBED_URL, EVERNOTE=str(export),
                             PRIVATE_TAGS="private")  # fmt: skip
    with open_store(settings) as store, embed_client(settings, transport=embedder_transport) as c:
        summary = run(settings, client=c, store=store)
    return settings, {"summary": summary, "export": export}


def served(settings: Settings, tmp_path: Path) -> Settings:
    copy = tmp_path / "qdrant"
    shutil.copytree(settings.QDRANT_PATH, copy)
    return settings.model_copy(update={"QDRANT_PATH": str(copy), "MCP_PORT": free_port()})


def test_each_note_of_an_export_is_one_item_and_a_broken_note_fails_alone_by_file_and_title(
    corpus,
):
    _, found = corpus
    summary = found["summary"]
    assert len(summary.added) == 3
    assert all(s.startswith("evernote/Cooking and more/") for s in summary.added)
    assert any(s.startswith("evernote/Cooking and more/Kimchi-") for s in summary.added)
    [private] = summary.private  # tagged private in Evernote: never embedded nor stored
    assert private.startswith("evernote/Cooking and more/Door codes-")
    [failure] = summary.failed
    assert failure.source == "Cooking and more.enex (note 'Broken scan')"
    assert "resource resource-1.pdf (application/pdf) is not valid base64" in failure.reason


def test_notes_are_searched_with_their_kind_tags_dates_and_the_pdf_page_locator(
    corpus, tmp_path, embedder_transport
):
    settings, _ = corpus
    with serve_in_process(served(settings, tmp_path), transport=embedder_transport) as server:
        query = {"query": "how long to ferment the kimchi jars", "kind": "note",
                 "path": "evernote/", "k": 3}  # fmt: skip
        [top, *_] = results(call_tool(server.url, "search_notes", query))
        assert top["title"] == "Kimchi"
        assert top["uri"].startswith("notes:///evernote/Cooking%20and%20more/Kimchi-")
        assert top["locator"] == "Attachment: fermentation.pdf, p. 2"
        assert {"recipes", "korean cuisine"} <= set(top["tags"])
        assert str(top["document_date"]).startswith("2024-03-01")
        mail = {**query, "kind": "email"}
        assert results(call_tool(server.url, "search_notes", mail)) == []  # notes, not messages
        dated = {"query": "glacier permit", "date_from": "2024-01-01", "k": 5}
        hits = results(call_tool(server.url, "search_notes", dated))
        assert "Glacier hike permits" not in [h["title"] for h in hits]  # created 2023
        tagged = {"query": "glacier permit", "tags": ["travel"], "k": 5}
        [hit] = results(call_tool(server.url, "search_notes", tagged))
        assert hit["title"] == "Glacier hike permits"
        board = {"query": "who carries the on-call pager", "path": "evernote/", "k": 1}
        [hit] = results(call_tool(server.url, "search_notes", board))
        assert (hit["title"], hit["locator"]) == ("Retro whiteboard", "Image: whiteboard.png")
        why = tool_answer(call_tool(server.url, "why_not_found", {"source": hit["source"]}))
        assert why["state"] == "indexed"
        unseen = {"source": "evernote/Cooking and more/Nothing-0123abcd"}
        why = tool_answer(call_tool(server.url, "why_not_found", unseen))
        assert why["state"] == "never_seen"
        assert "no note of the EVERNOTE exports is named so" in str(why["story"])


def test_a_note_reads_back_with_its_dates_checkboxes_and_images_named_but_not_its_secrets(
    corpus, tmp_path, embedder_transport
):
    settings, _ = corpus
    with serve_in_process(served(settings, tmp_path), transport=embedder_transport) as server:
        query = {"query": "sprint retro deploy pipeline", "path": "evernote/", "k": 1}
        [retro] = results(call_tool(server.url, "search_notes", query))
        text = tool_answer(call_tool(server.url, "read_note", {"source": retro["source"]}))
        assert "[image: whiteboard.png]" in text["text"]
        assert "ACTION ITEMS rotate the on-call pager weekly" in text["text"]  # not "rorate"
        assert "U2VjcmV0IQ==" not in text["text"] and "[encrypted]" in text["text"]
        query = {"query": "napa cabbage brine", "path": "evernote/", "k": 1}
        [kimchi] = results(call_tool(server.url, "search_notes", query))
        text = tool_answer(call_tool(server.url, "read_note", {"source": kimchi["source"]}))
        assert "created 2024-03-01 · updated 2024-03-05" in text["text"]
        assert "[x] buy cabbage" in text["text"]


def entry(**fields: object) -> Entry:
    made = {"title": "Whiteboard", "created": "20250110T160000Z", "updated": "",
            "tags": [], "source_url": "", "content": enml("<div>photo below</div>"),
            "resources": []}  # fmt: skip
    made.update(fields)
    return Entry(**made)  # type: ignore[arg-type]


def test_an_images_text_is_read_by_ocr_when_evernote_recognised_none(monkeypatch, tmp_path):
    monkeypatch.setattr(ocr, "_config", ocr.Config())  # whatever this test sets is undone
    ocr.configure(True, tmp_path)  # the product's setting, as the backend applies it
    drawn = base64.b64encode(png(["Q3 roadmap: ship search"])).decode()
    image = Resource("image/png", "board.png", drawn)
    note = note_of(entry(resources=[image]), "evernote/n/w", tmp_path, 10_000)
    [block] = note.tail
    assert block.locator == "Image: board.png"
    assert "roadmap" in note.text[block.start : block.end].lower()
    ocr.configure(False, None)
    off = note_of(entry(resources=[image]), "evernote/n/w", tmp_path, 10_000)
    assert not off.tail  # OCR=off: the image is named, nothing more


def test_a_note_over_note_max_bytes_fails_alone(tmp_path):
    big = Resource("application/pdf", "big.pdf", base64.b64encode(b"x" * 5000).decode())
    with pytest.raises(evernote.NoteError, match=r"note over 1000 bytes \(NOTE_MAX_BYTES\)"):
        note_of(entry(resources=[big]), "evernote/n/big", tmp_path, 1000)


BOMB = (
    '<?xml version="1.0"?>\n<!DOCTYPE en-export [\n<!ENTITY a "aaaaaaaaaa">\n'
    '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">\n<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">\n'
    "]>\n<en-export><note><title>&c;</title><content>x</content></note></en-export>\n"
)
EXTERNAL = (
    '<?xml version="1.0"?>\n<!DOCTYPE en-export [<!ENTITY secret SYSTEM "file:///etc/passwd">]>'
    "\n<en-export><note><title>t</title><content>&secret;</content></note></en-export>\n"
)


@pytest.mark.parametrize("xml", [BOMB, EXTERNAL], ids=["entity bomb", "external entity"])
def test_an_export_declaring_entities_is_refused_by_name_and_nothing_else_fails(tmp_path, xml):
    (tmp_path / "bad.enex").write_text(xml)
    write_export(tmp_path / "good.enex")
    source = EvernoteSource([tmp_path], 1_000_000)
    listing = source.listing(everything=True)
    [failure] = listing.failed
    assert failure.source == "bad.enex"
    assert failure.reason.startswith("refused: it declares XML entities")
    assert len(listing.items) == 5  # good.enex's notes, the broken one among them


def test_an_export_cut_halfway_keeps_the_notes_before_the_break_and_the_stored_ones_after(
    tmp_path,
):
    whole = write_export(tmp_path / "full.enex").read_text()
    cut = whole[: whole.index("<note><title>Glacier")] + "<note><title>Glac"
    path = tmp_path / "cut.enex"
    path.write_text(cut)
    source = EvernoteSource([path], 1_000_000)
    listing = source.listing(everything=True)
    assert [i.shown for i in listing.items] == [
        "cut.enex (note 'Kimchi')", "cut.enex (note 'Retro whiteboard')"
    ]  # fmt: skip
    [failure] = listing.failed
    assert failure.source == "cut.enex" and "not well-formed XML from line" in failure.reason
    assert source.holds("evernote/cut/Glacier hike permits-0123abcd")  # not soft-deleted


def test_a_note_gone_from_its_export_is_soft_deleted(corpus, tmp_path, embedder_transport):
    settings, found = corpus
    settings = served(settings, tmp_path)
    export = tmp_path / "Cooking and more.enex"
    whole = found["export"].read_text()
    start, end = whole.index("<note><title>Glacier"), whole.index("<note><title>Broken")
    export.write_text(whole[:start] + whole[end:])
    settings = settings.model_copy(update={"EVERNOTE": str(export)})
    with open_store(settings) as store, embed_client(settings, transport=embedder_transport) as c:
        summary = run(settings, client=c, store=store)
    [gone] = summary.deleted
    assert gone.startswith("evernote/Cooking and more/Glacier hike permits-")
    assert summary.added == [] and len(summary.unchanged) == 2  # nothing embedded again
    with serve_in_process(settings, transport=embedder_transport) as server:
        listed = tool_answer(call_tool(server.url, "list_deleted", {}))
        assert gone in str(listed) and "note_removed" in str(listed)
