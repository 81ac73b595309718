from pathlib import Path

import pytest

from kb.content.notes import (
    FrontmatterError,
    NoteError,
    PrivateFieldError,
    decode_note,
    normalise_tags,
    parse_note,
    read_note,
)


def parse(text: str, source: str = "n.md"):
    return parse_note(text, Path(source), source)


def test_tags_are_lowercased_trimmed_whitespace_collapsed_and_deduplicated():
    note = parse(
        "---\ntags: [Korean Cuisine, ' korean   cuisine ', KOREAN CUISINE, Recipes]\n---\nx"
    )
    assert note.tags == ("korean cuisine", "recipes")


def test_tags_may_be_a_comma_separated_string():
    assert parse("---\ntags: 'Bread,  Sourdough , bread,'\n---\nx").tags == ("bread", "sourdough")


def test_tag_normalisation_unifies_unicode_forms_and_accepts_numbers():
    # "é" composed vs "e" + combining accent; YAML reads 2024 and 3.11 as numbers
    assert normalise_tags(["Caf\u00e9", "Cafe\u0301", 2024, 3.11, None, ""]) == [
        "caf\u00e9",
        "2024",
        "3.11",
    ]


def test_tags_of_the_wrong_shape_are_refused_naming_the_field():
    with pytest.raises(NoteError, match="tags must be"):
        parse("---\ntags: [[nested, list]]\n---\nx")
    with pytest.raises(NoteError, match="tags must be"):
        parse("---\ntags: [{a: b}]\n---\nx")


def test_note_without_frontmatter_has_no_tags_topic_or_date_and_keeps_all_its_text():
    note = parse("Just a thought.\n\n---\nnot: frontmatter\n")
    assert (note.tags, note.topic, note.document_date) == ((), None, None)
    assert note.body == note.text


def test_topic_is_one_line_of_text_and_other_fields_are_ignored():
    note = parse("---\ntopic: >\n  How I make\n  kimchi.\nauthor: me\nrating: 5\n---\nbody")
    assert note.topic == "How I make kimchi."
    assert note.body == "body"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-03-01", "2024-03-01"),
        ("'2024-03-01'", "2024-03-01"),
        ("2024-03-01 10:30:00", "2024-03-01T10:30:00"),
        ("2024-03-01T10:30:00Z", "2024-03-01T10:30:00+00:00"),
        ("2024-03-01t10:30:00.5+02:00", "2024-03-01T10:30:00.500000+02:00"),
        ('"2024-03-01T10:30"', "2024-03-01T10:30:00"),
    ],
)
def test_document_date_in_any_yaml_form_is_stored_as_iso(value: str, expected: str):
    assert parse(f"---\ndocument_date: {value}\n---\nx").document_date == expected


@pytest.mark.parametrize("value", ["next tuesday", "2024", "[2024-03-01]"])
def test_a_document_date_that_is_not_a_date_is_refused_naming_the_field(value: str):
    with pytest.raises(NoteError, match="document_date") as caught:
        parse(f"---\ndocument_date: {value}\n---\nx")
    assert not isinstance(caught.value, FrontmatterError)  # the note fails, the run goes on


def test_invalid_yaml_names_the_file_and_the_line_of_the_error():
    text = "---\ntitle: ok\ntags: [unclosed, list\ntopic: x\n---\nbody\n"
    with pytest.raises(FrontmatterError) as caught:
        parse(text, "sub/bad.md")
    message = str(caught.value)
    assert message.startswith("sub/bad.md: frontmatter is not valid YAML")
    # the flow list opened on file line 3 is still open when `topic:` arrives on line 4
    assert "line 4" in message


def test_a_yaml_error_on_the_first_frontmatter_line_is_reported_as_file_line_2():
    with pytest.raises(FrontmatterError, match="line 2"):
        parse("---\ntags: a: b\n---\nbody")


def test_an_impossible_yaml_timestamp_is_a_frontmatter_error():
    with pytest.raises(FrontmatterError, match="not valid YAML"):
        parse("---\ndocument_date: 2024-13-45\n---\nx")


def test_frontmatter_that_is_not_key_value_pairs_is_refused():
    with pytest.raises(FrontmatterError, match="key: value"):
        parse("---\n- just\n- a list\n---\nbody")


def test_frontmatter_without_a_closing_line_is_refused():
    with pytest.raises(FrontmatterError, match="no closing"):
        parse("---\ntags: [a]\nbody text but no closing line\n")


def test_crlf_line_endings_byte_order_mark_and_dots_closer_are_understood():
    note = parse("\ufeff---\r\ntags: [A]\r\n...\r\nBody line\r\n")
    assert note.tags == ("a",)
    assert note.body == "Body line\r\n"


def test_empty_frontmatter_block_is_fine():
    assert parse("---\n---\nbody").body == "body"


def test_a_note_with_only_frontmatter_has_no_text_to_ingest():
    with pytest.raises(NoteError, match="no text after the frontmatter"):
        parse("---\ntags: [a]\n---\n\n  \n")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty file"),
        (b" \n\t\n", "empty file"),
        (b"abc\x00def", "NUL byte at offset 3"),
        (b"caf\xe9 au lait", "not UTF-8 text (byte 0xe9 at offset 3)"),
    ],
)
def test_files_that_are_not_text_notes_are_refused_with_a_reason(data: bytes, reason: str):
    with pytest.raises(NoteError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        decode_note(data, "x.md")


def test_a_note_over_the_size_limit_is_refused_naming_the_setting(tmp_path: Path):
    path = tmp_path / "big.md"
    path.write_bytes(b"word " * 1000)
    with pytest.raises(NoteError, match="NOTE_MAX_BYTES=4,999"):
        read_note(path, "big.md", max_bytes=4999)
    assert read_note(path, "big.md", max_bytes=5000).source == "big.md"


@pytest.mark.parametrize(
    ("field", "private"),
    [("", False), ("private: true\n", True), ("private: yes\n", True), ("private: True\n", True),
     ("private: false\n", False), ("private: no\n", False), ("private:\n", False)],
)  # fmt: skip
def test_private_is_read_as_a_yaml_boolean_and_defaults_to_false(field: str, private: bool):
    assert parse(f"---\n{field}tags: x\n---\nbody").private is private


@pytest.mark.parametrize("value", ['"true"', "'yes'", "1", "maybe", "[true]"])
def test_a_private_value_that_is_not_a_boolean_is_refused_rather_than_guessed(value: str):
    with pytest.raises(PrivateFieldError, match="private must be true or false") as caught:
        parse(f"---\nprivate: {value}\n---\nbody")
    assert "body" not in caught.value.reason
