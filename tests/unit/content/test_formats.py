"""kb.content.formats: real files of every kind -> readable text, chunks and locators; bad files
named."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from format_files import (
    CODE,
    CSV_PHRASE,
    DOCX_PHRASE,
    PDF_PHRASE,
    PYTHON,
    docx_bytes,
    encrypted_pdf,
    image_only_pdf,
    notebook_text,
    table_text,
    three_page_pdf,
    write_bytes,
)
from ingest_fixtures import make_settings

from kb.content.chunking import Chunk, chunk_note, note_title
from kb.content.notes import NoteError, read_note
from kb.core.errors import ConfigError
from kb.core.settings import describe_invalid
from kb.sources.files import SECRET
from kb.sources.folder import FolderSource


def chunks_of(path: Path, max_bytes: int = 10_000_000) -> list[Chunk]:
    note = read_note(path, path.name, max_bytes=max_bytes)
    chunks = chunk_note(note)
    for c in chunks:  # every chunk is the readable text at its offsets
        assert note.text[c.char_start : c.char_end] == c.text
    return chunks


def test_a_pdf_is_read_page_by_page_and_its_phrase_is_located_on_page_2(tmp_path: Path):
    chunks = chunks_of(write_bytes(tmp_path / "island.pdf", three_page_pdf()))
    assert [c.locator for c in chunks] == ["p. 1", "p. 2", "p. 3"]
    assert [c.locator for c in chunks if PDF_PHRASE in c.text] == ["p. 2"]
    note = read_note(tmp_path / "island.pdf", "island.pdf", max_bytes=10**7)
    assert note.domain == "prose" and note.text.startswith("[p. 1]\n")


def test_a_docx_keeps_its_headings_and_tables_in_order_and_locates_paragraphs(tmp_path: Path):
    note = read_note(write_bytes(tmp_path / "kitchen.docx", docx_bytes()), "kitchen.docx",
                     max_bytes=10**7)  # fmt: skip
    assert note.text.index("## Baking") < note.text.index(DOCX_PHRASE) < note.text.index("deck")
    [chunk] = chunk_note(note)
    assert chunk.heading_path == ("Kitchen handbook",)
    assert chunk.locator == "Kitchen handbook, ¶ 1"
    small = chunk_note(note, chunk_chars=120)
    found = [c for c in small if DOCX_PHRASE in c.text]
    assert [c.heading_path for c in found] == [("Kitchen handbook", "Baking")]
    assert found[0].locator.startswith("Kitchen handbook > Baking, ¶ ")


def test_html_is_read_without_scripts_or_styles_and_keeps_its_headings(tmp_path: Path):
    page = (
        "<html><head><title>Garden</title><style>body{color:red}</style></head><body>"
        "<script>alert('tracking')</script><h1>Garden</h1><p>Plant garlic in autumn.</p>"
        "<h2>Pests</h2><p>Slugs love <b>lettuce</b>.</p></body></html>"
    )
    chunks = chunks_of(write_bytes(tmp_path / "garden.html", page))
    text = "\n".join(c.text for c in chunks)
    assert "Plant garlic" in text and "**lettuce**" in text
    assert "alert" not in text and "color:red" not in text
    assert chunks[0].locator == "Garden"


@pytest.mark.parametrize(("name", "delimiter"), [("cities.csv", ","), ("cities.tsv", "\t")])
def test_each_table_row_is_one_chunk_naming_its_columns(tmp_path: Path, name, delimiter):
    chunks = chunks_of(write_bytes(tmp_path / name, table_text(delimiter)))
    assert [c.locator for c in chunks] == ["row 2", "row 3"]
    assert (
        chunks[1].text == f"city: {CSV_PHRASE} | country: Portugal | note: custard tarts and trams"
    )
    assert chunks[0].text == "city: Oslo | country: Norway | note: fjords, ferries"
    assert [c.line_start for c in chunks] == [2, 3]  # line N of the readable text is row N


def test_config_files_are_cut_by_top_level_key_or_section(tmp_path: Path):
    yaml_chunks = chunks_of(write_bytes(tmp_path / "c.yaml", "# top\nname: demo\nservices:\n"
                                        "  web:\n    image: nginx\nvolumes: {}\n"))  # fmt: skip
    assert [(c.locator, c.line_start, c.line_end) for c in yaml_chunks] == [
        ("L 1-1", 1, 1), ("name", 2, 2), ("services", 3, 5), ("volumes", 6, 6)
    ]  # fmt: skip
    toml = chunks_of(write_bytes(tmp_path / "c.toml", "a = 1\n[tool.x]\nb = 2\n[[item]]\nc = 3\n"))
    assert [c.locator for c in toml] == ["L 1-1", "tool.x", "item"]
    ini = chunks_of(write_bytes(tmp_path / "c.ini", "[server]\nport = 80\n\n[db]\nname = x\n"))
    assert [c.locator for c in ini] == ["server", "db"]
    js = chunks_of(write_bytes(tmp_path / "c.json", '{"name": "x", "deps": {"a": "1"}}'))
    assert [c.locator for c in js] == ["name", "deps"]
    assert '"a": "1"' in js[1].text


def test_a_notebook_gives_one_chunk_per_cell_and_drops_outputs(tmp_path: Path):
    note = read_note(write_bytes(tmp_path / "rain.ipynb", notebook_text()), "rain.ipynb",
                     max_bytes=10**7)  # fmt: skip
    chunks = chunk_note(note)
    assert note.domain == "code"
    assert [c.locator for c in chunks] == ["cell 1 [markdown]", "cell 2 [code]", "cell 3 [code]"]
    assert chunks[1].text == "import pandas as pd\nrain = pd.read_csv('rain.csv')"
    assert "SECRET OUTPUT" not in note.text


def test_python_is_cut_into_its_preamble_and_top_level_definitions(tmp_path: Path):
    note = read_note(write_bytes(tmp_path / "inv.py", PYTHON), "inv.py", max_bytes=10**7)
    chunks = chunk_note(note)
    assert [(c.locator, c.heading_path) for c in chunks] == [
        ("L 1-5", ()), ("L 8-10", ("restock",)), ("L 13-20", ("Shelf",))
    ]  # fmt: skip
    assert chunks[2].text.startswith("class Shelf") and note.domain == "code"
    # a class too long for one chunk: its header, then one chunk per method
    small = read_note(tmp_path / "inv.py", "inv.py", max_bytes=10**7, chunk_chars=120)
    split = chunk_note(small, chunk_chars=120)
    assert [c.heading_path for c in split][-3:] == [
        ("Shelf",), ("Shelf", "__init__"), ("Shelf", "put")
    ]  # fmt: skip


def test_a_python_file_that_does_not_parse_is_indexed_as_line_windows_with_a_notice(
    tmp_path: Path,
):
    text = "".join(f"value_{i} = compute({i}, 'some argument text here')\n" for i in range(80))
    note = read_note(write_bytes(tmp_path / "bad.py", text + "def broken(:\n"), "bad.py",
                     max_bytes=10**7)  # fmt: skip
    assert note.notice == "Python syntax error at line 81: indexed as line windows"
    chunks = chunk_note(note)
    assert len(chunks) >= 3 and all(c.locator.startswith("L ") for c in chunks)
    # windows overlap by a few lines, so a statement cut at a boundary is seen whole
    assert all(b.line_start <= a.line_end for a, b in itertools.pairwise(chunks))


@pytest.mark.parametrize("name", sorted(CODE))
def test_code_in_other_languages_is_split_by_its_grammar_with_line_locators(tmp_path: Path, name):
    chunks = chunks_of(write_bytes(tmp_path / name, CODE[name]))
    assert chunks and all(c.locator == f"L {c.line_start}-{c.line_end}" for c in chunks)
    assert "".join(c.text for c in chunks).replace("\n", "") == CODE[name].replace("\n", "")


def test_code_without_a_grammar_is_cut_into_overlapping_line_windows(tmp_path: Path):
    text = "".join(f"val line{i} = listOf({i}, {i + 1}, {i + 2}) // kotlin\n" for i in range(90))
    chunks = chunks_of(write_bytes(tmp_path / "Main.kt", text))
    assert len(chunks) >= 3
    assert all(b.line_start <= a.line_end < b.line_end for a, b in itertools.pairwise(chunks))


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("locked.pdf", encrypted_pdf(), "encrypted PDF (password protected): no text to index"),
        ("scan.pdf", image_only_pdf(), "no text in its 1 pages, not even by OCR"),
        ("broken.pdf", b"%PDF-1.4\nnot really", "not a readable PDF"),
        ("broken.docx", b"PK\x03\x04 truncated zip", "not a valid .docx"),
        ("broken.ipynb", '{"cells": [', "not a valid notebook (invalid JSON at line 1"),
        ("broken.csv", 'a,b\n"unclosed,1\n2,3\n', "broken CSV near line 3"),
        ("mixed.csv", "a,b\nné,1\n".encode() + b"caf\xe9,2\n", "not UTF-8 text (byte 0xe9"),
        ("broken.json", '{"a": }', "not valid JSON (line 1"),
        ("broken.yaml", "a: [1, 2\n", "not valid YAML"),
    ],
)
def test_a_bad_file_is_refused_with_a_reason(tmp_path: Path, name, data, reason):
    path = write_bytes(tmp_path / name, data)
    with pytest.raises(NoteError) as refused:
        read_note(path, name, max_bytes=10**7)
    assert refused.value.reason.startswith(reason), refused.value.reason


def test_a_file_over_the_size_cap_is_refused_before_it_is_read(tmp_path: Path):
    path = write_bytes(tmp_path / "big.csv", "a,b\n" + "1,2\n" * 1000)
    with pytest.raises(NoteError, match=r"too large \(4,004 bytes > NOTE_MAX_BYTES=1,000\)"):
        read_note(path, "big.csv", max_bytes=1000)


def test_secrets_and_keys_are_never_listed_and_other_kinds_follow_index_extensions(
    tmp_path: Path,
):
    root = tmp_path / "vault"
    for name in ("a.md", "b.pdf", "c.py", "server.key", "cert.pem", "id_rsa", "prod.env",
                 "credentials.json", "d.json", "e.unknown"):  # fmt: skip
        write_bytes(root / name, "x")
    everything = FolderSource("vault", root).listing(everything=True)
    assert sorted(i.source.split("/")[1] for i in everything.items) == [
        "a.md", "b.pdf", "c.py", "d.json"
    ]  # fmt: skip
    assert everything.skipped == {SECRET: 5}
    assert everything.ignored == ["vault/e.unknown"]
    settings = make_settings(tmp_path, INDEX_EXTENSIONS=".md, .PDF")
    narrow = FolderSource("vault", root, suffixes=settings.index_extensions)
    assert sorted(i.source for i in narrow.listing(everything=True).items) == [
        "vault/a.md", "vault/b.pdf"
    ]  # fmt: skip


@pytest.mark.parametrize("value", [".md,.pem", ".md,.exe", ".env"])
def test_index_extensions_refuses_secrets_and_unknown_kinds(tmp_path: Path, value: str):
    with pytest.raises(Exception) as refused:
        make_settings(tmp_path, INDEX_EXTENSIONS=value)
    assert "INDEX_EXTENSIONS" in describe_invalid(refused.value)
    assert not isinstance(refused.value, ConfigError)  # a ValidationError, named by get_settings


def test_notes_keep_their_titles_and_other_kinds_are_titled_by_file_name(tmp_path: Path):
    txt = read_note(write_bytes(tmp_path / "walk-notes.txt", "Cliffs at dusk.\n"),
                    "walk-notes.txt", max_bytes=10**7)  # fmt: skip
    assert note_title(txt) == "walk notes"  # as before other kinds existed
    code = read_note(write_bytes(tmp_path / "inv.py", "# Not a heading\nx = 1\n"), "inv.py",
                     max_bytes=10**7)  # fmt: skip
    assert note_title(code) == "inv.py"
