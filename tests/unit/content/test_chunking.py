import random
from pathlib import Path

import pytest

from kb.content.chunking import CHUNK_CHARS, chunk_note, chunk_text, embedding_text, note_title
from kb.content.notes import parse_note

_rng = random.Random(3)
_WORDS = [
    "flow",
    "wing",
    "shock",
    "layer",
    "pressure",
    "heat",
    "bread",
    "flour",
    "river",
    "note",
    "vector",
    "index",
]


def sentence(n_words: int = 12) -> str:
    return " ".join(_rng.choice(_WORDS) for _ in range(n_words)).capitalize() + "."


def paragraph(chars: int) -> str:
    text = ""
    while len(text) < chars:
        text += sentence() + " "
    return text.strip()


def note(text: str, source: str = "n.md"):
    return parse_note(text, Path(source), source)


def assert_locators(text: str, chunks) -> None:
    lines = text.split("\n")
    for i, chunk in enumerate(chunks):
        assert chunk.index == i
        assert text[chunk.char_start : chunk.char_end] == chunk.text
        assert chunk.line_start == text.count("\n", 0, chunk.char_start) + 1
        assert chunk.line_end == text.count("\n", 0, chunk.char_end - 1) + 1
        assert chunk.text in "\n".join(lines[chunk.line_start - 1 : chunk.line_end])


@pytest.mark.parametrize(
    "text",
    [
        paragraph(9000),  # one paragraph, no line breaks
        "x" * 4000,  # no break of any kind
        "\n".join(paragraph(90) for _ in range(80)),  # many single lines
        "한국어 문장입니다. 東京タワー " * 700,  # multi-byte characters count as one each
        "\n\n".join(paragraph(_rng.randint(50, 2500)) for _ in range(30)),
    ],
)
def test_chunks_never_exceed_1500_characters_and_cover_the_text(text: str):
    chunks = chunk_text(text)
    assert CHUNK_CHARS == 1500
    assert all(0 < len(c.text) <= 1500 for c in chunks)
    assert "".join(c.text for c in chunks).replace(" ", "").replace("\n", "") == text.replace(
        " ", ""
    ).replace("\n", "")
    assert_locators(text, chunks)


def test_short_paragraphs_are_packed_together_and_splits_fall_on_paragraph_breaks():
    paragraphs = [paragraph(400) for _ in range(9)]
    text = "\n\n".join(paragraphs)
    chunks = chunk_text(text)
    assert len(chunks) == 3  # 3 paragraphs of ~400 chars fit in 1500, a 4th does not
    for chunk in chunks:
        assert chunk.text.split("\n\n") == paragraphs[: len(chunk.text.split("\n\n"))]
        paragraphs = paragraphs[len(chunk.text.split("\n\n")) :]
    assert paragraphs == []


def test_a_paragraph_too_long_for_one_chunk_splits_at_line_breaks_before_words():
    lines = [paragraph(300) for _ in range(8)]  # one 2400-char paragraph of 300-char lines
    chunks = chunk_text("\n".join(lines))
    assert len(chunks) == 2
    assert all(c.text.split("\n")[-1] in lines for c in chunks)  # every chunk ends a line


def test_a_line_too_long_for_one_chunk_splits_between_words():
    text = paragraph(4000)
    words = set(text.split())
    for chunk in chunk_text(text):
        first, last = chunk.text.split()[0], chunk.text.split()[-1]
        assert first in words and last in words  # no word was cut in half


def test_a_fenced_code_block_that_fits_is_never_split():
    # blank lines inside the block: a plain-text splitter would cut there
    body = "".join(f"value_{i} = compute({i})  # step\n" + "\n" * (i % 5 == 4) for i in range(36))
    code = "```python\n" + body + "```"
    assert 1000 < len(code) < 1500
    text = "\n\n".join([paragraph(700), code, paragraph(700)])
    chunks = chunk_text(text)
    holding = [c for c in chunks if "value_0 =" in c.text]
    assert len(holding) == 1 and code in holding[0].text
    assert all("```" not in c.text for c in chunks if c is not holding[0])


def test_frontmatter_is_not_chunked_but_locators_count_its_lines():
    text = "---\ntags: [a]\ntopic: T.\n---\n# Title\n\nFirst paragraph.\n"
    chunks = chunk_note(note(text))
    assert [c.text for c in chunks] == ["# Title\n\nFirst paragraph."]
    assert (chunks[0].line_start, chunks[0].line_end) == (5, 7)
    assert_locators(text, chunks)


def test_txt_notes_are_split_as_plain_text_at_blank_lines():
    paragraphs = [paragraph(900) for _ in range(3)]
    chunks = chunk_note(note("\n\n".join(paragraphs), "plain.txt"))
    assert [c.text for c in chunks] == paragraphs


def test_the_topic_is_embedded_with_every_chunk_and_the_chunk_alone_is_stored():
    n = note(
        "---\ntopic: How I bake bread.\n---\n" + "\n\n".join(paragraph(1000) for _ in range(3)),
        "baking/sourdough_log.md",
    )
    chunks = chunk_note(n)
    assert len(chunks) == 3
    for chunk in chunks:
        # no `#` title: the file name stands in for it
        assert embedding_text(chunk, n) == "sourdough log\nHow I bake bread.\n\n" + chunk.text
        assert "How I bake" not in chunk.text
    plain = note("no topic here", "plain.txt")
    assert embedding_text(chunk_note(plain)[0], plain) == "plain\n\nno topic here"


def test_the_title_is_the_first_level_one_heading_else_the_file_name():
    assert note_title(note("intro\n\n## Not it\n\n# Kimchi\n\ntext\n# Later\n")) == "Kimchi"
    assert note_title(note("Pickles\n=======\n\ntext\n")) == "Pickles"
    assert note_title(note("## only a section\n\ntext", "food/kimchi-recipe_v2.md")) == (
        "kimchi recipe v2"
    )


KIMCHI_NOTE = f"""# Kimchi

{paragraph(300)}

## Ingredients

{paragraph(900)}

## Steps

### Salting

{paragraph(1200)}

```bash
# brine strength: not a heading
echo 5%
```

### Fermenting

{paragraph(1400)}

{paragraph(1400)}
"""


def test_chunks_follow_the_heading_tree_and_carry_their_heading_path():
    chunks = chunk_note(note(KIMCHI_NOTE, "food/kimchi.md"))
    assert [c.heading_path for c in chunks] == [
        ("Kimchi",),
        ("Kimchi", "Ingredients"),
        ("Kimchi", "Steps", "Salting"),
        ("Kimchi", "Steps", "Fermenting"),
        ("Kimchi", "Steps", "Fermenting"),
    ]
    assert chunks[1].text.startswith("## Ingredients\n\n")
    # "## Steps" has no text of its own: it opens the chunk of its first subsection
    assert chunks[2].text.startswith("## Steps\n\n### Salting\n\n")
    assert "echo 5%\n```" in chunks[2].text  # the code block (with its `#` line) stays whole
    # a section too long for one chunk is packed by paragraphs, its heading never left alone
    assert chunks[3].text.startswith("### Fermenting\n\n") and len(chunks[3].text) > 1000
    assert all(len(c.text) <= CHUNK_CHARS for c in chunks)
    assert_locators(KIMCHI_NOTE, chunks)


def test_a_section_that_fits_stays_one_chunk_with_its_subsections():
    text = f"# Log\n\n## Monday\n\n{paragraph(200)}\n\n## Tuesday\n\n{paragraph(200)}\n"
    [chunk] = chunk_note(note(text))
    assert chunk.text == text.strip()
    assert chunk.heading_path == ("Log",)


def test_embedded_text_carries_title_and_heading_path_but_not_headings_the_chunk_shows():
    n = note("---\ntopic: Home-made kimchi.\n---\n" + KIMCHI_NOTE, "food/kimchi.md")
    chunks = chunk_note(n)
    texts = [embedding_text(c, n) for c in chunks]
    assert texts[0] == "Home-made kimchi.\n\n" + chunks[0].text  # starts with "# Kimchi"
    assert texts[1] == "Kimchi\nHome-made kimchi.\n\n" + chunks[1].text
    assert texts[2] == "Kimchi\nHome-made kimchi.\n\n" + chunks[2].text  # shows both headings
    assert texts[3] == "Kimchi > Steps\nHome-made kimchi.\n\n" + chunks[3].text
    assert texts[4] == "Kimchi > Steps > Fermenting\nHome-made kimchi.\n\n" + chunks[4].text


def test_editing_one_paragraph_of_a_20_chunk_note_changes_only_that_chunks_embedded_text():
    rng = random.Random(4)
    words = _WORDS

    def para(chars: int) -> str:
        text = ""
        while len(text) < chars:
            text += " ".join(rng.choice(words) for _ in range(12)).capitalize() + ". "
        return text.strip()

    sections = [[para(rng.randint(150, 400)) for _ in range(rng.randint(1, 3))] for _ in range(24)]

    def embedded(parts: list[list[str]]) -> list[str]:
        body = "\n\n".join(f"## Part {i}\n\n" + "\n\n".join(paras) for i, paras in enumerate(parts))
        n = note(f"# Notebook\n\n{body}\n", "notebook.md")
        return [embedding_text(c, n) for c in chunk_note(n)]

    before = embedded(sections)
    assert len(before) >= 20
    for part in (0, 6, 12, 18):
        edited = [list(paras) for paras in sections]
        edited[part][0] += " " + para(100)  # one paragraph grows by a sentence or two
        after = embedded(edited)
        # only the chunk holding that paragraph is new (packing whole sections together, as
        # the splitter alone does, re-cuts two chunks after one of these edits)
        assert sum(text not in before for text in after) == 1
        assert len(after) == len(before)
