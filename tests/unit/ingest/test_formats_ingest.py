"""Every file kind through a real ingest (MiniLM embedder, embedded Qdrant) and search: hits carry
their locator; bad files are named in the summary and the run goes on."""

from __future__ import annotations

from format_files import (
    CSV_PHRASE,
    DOCX_PHRASE,
    PDF_PHRASE,
    docx_bytes,
    encrypted_pdf,
    image_only_pdf,
    notebook_text,
    table_text,
    three_page_pdf,
    write_bytes,
)

from kb.app.ingest import run
from kb.ingest.progress import format_summary
from kb.search.domains import search_all
from kb.search.query import search
from kb.store import collection


def test_files_of_every_kind_are_found_with_their_locator_and_bad_ones_are_named(
    settings, client, store
):
    inbox = settings.NOTES_DIR
    write_bytes(inbox / "island.pdf", three_page_pdf())
    write_bytes(inbox / "kitchen.docx", docx_bytes())
    write_bytes(inbox / "cities.csv", table_text())
    write_bytes(inbox / "rain.ipynb", notebook_text())
    write_bytes(inbox / "locked.pdf", encrypted_pdf())
    write_bytes(inbox / "scan.pdf", image_only_pdf())
    write_bytes(inbox / "broken.docx", b"PK\x03\x04 not a zip")
    write_bytes(inbox / "broken.ipynb", "{")
    write_bytes(inbox / "broken.csv", 'a,b\n"open,1\n')
    write_bytes(inbox / "odd.py", "x = 1\ndef broken(:\n")
    write_bytes(inbox / ".env", "TOKEN=secret")
    write_bytes(inbox / "deploy.key", "-----BEGIN PRIVATE KEY-----")

    summary = run(settings, client, store)

    assert sorted(summary.ingested) == [
        "cities.csv", "island.pdf", "kitchen.docx", "odd.py", "rain.ipynb"
    ]  # fmt: skip
    reasons = {f.source: f.reason for f in summary.failed}
    assert reasons == {
        "locked.pdf": "encrypted PDF (password protected): no text to index",
        "scan.pdf": "no text in its 1 pages, not even by OCR",
        "broken.docx": reasons["broken.docx"],
        "broken.ipynb": "not a valid notebook (invalid JSON at line 1: Expecting property name "
        "enclosed in double quotes)",
        "broken.csv": "broken CSV near line 2: unexpected end of data",
    }
    assert reasons["broken.docx"].startswith("not a valid .docx (corrupt, or not a Word file")
    assert [(n.source, n.reason) for n in summary.notices] == [
        ("odd.py", "Python syntax error at line 2: indexed as line windows")
    ]
    shown = format_summary(summary)
    assert "failed: locked.pdf: encrypted PDF" in shown and "note: odd.py: Python syntax" in shown
    assert "TOKEN" not in shown and "deploy.key" not in shown  # secrets: only counted
    assert (inbox / "locked.pdf").exists() and not (inbox / "island.pdf").exists()

    [pdf] = search(store, client, "quokka smiles Rottnest Island", k=1)
    assert (pdf.source, pdf.locator, pdf.domain) == ("island.pdf", "p. 2", "prose")
    assert PDF_PHRASE in pdf.text
    [row] = search(store, client, f"{CSV_PHRASE} Portugal custard tarts", k=1, mode="keyword")
    assert (row.source, row.locator) == ("cities.csv", "row 3")
    [para] = search(store, client, "feeding the sourdough starter with rye", k=1)
    assert para.source == "kitchen.docx" and DOCX_PHRASE in para.text
    assert para.locator.startswith("Kitchen handbook")
    # code and notebooks are in the code collection, found through domain code or all
    code = (store.beside(settings.CODE_COLLECTION), client)
    assert search(store, client, "rain groupby month sum", k=5, mode="keyword") == []
    [cell] = search_all((store, client), code, "rain groupby month sum", 1, domain="code",
                        mode="keyword")  # fmt: skip
    assert (cell.source, cell.locator, cell.domain) == ("rain.ipynb", "cell 3 [code]", "code")
    mixed = search_all((store, client), code, "monthly rainfall totals", 4, domain="all")
    assert {h.domain for h in mixed} == {"prose", "code"}  # fused by rank: neither buries
    assert "rain.ipynb" in [h.source for h in mixed[:2]]


def test_a_code_collection_of_another_model_is_rebuilt_beside_it_alone(settings, client, store):
    write_bytes(settings.NOTES_DIR / "notes.md", "# Trips\n\nA walk along the cliffs at dusk.\n")
    write_bytes(settings.NOTES_DIR / "inv.py", "def restock(item):\n    return item * 3\n")
    code_store = store.beside(settings.CODE_COLLECTION)
    collection.create(code_store, "some-code-model", client.dimensions)
    summary = run(settings, client, store)  # kb.ingest.switch: built beside, then switched
    assert "inv.py" in summary.added
    assert collection.info(code_store).model == client.model
    assert code_store.target() != settings.CODE_COLLECTION  # the name is an alias now
    assert store.target() == settings.COLLECTION  # the prose collection was not rebuilt
    assert collection.info(store).model == client.model
