"""Real files of every indexed kind, made with real writer libraries (fpdf2, python-docx, json,
csv), for the format, ingest and read_note tests."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import docx
from fpdf import FPDF

PDF_PHRASE = "The quokka smiles at dawn on Rottnest Island."
DOCX_PHRASE = "Sourdough starter needs feeding twice a day with rye flour."
CSV_PHRASE = "Lisbon"

PYTHON = '''"""Tiny inventory module."""

import os

LIMIT = 3


def restock(item: str) -> int:
    """Order more of an item."""
    return len(item) * LIMIT


class Shelf:
    """A shelf of items."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def put(self, item: str) -> None:
        self.items.append(item)
'''
CODE = {
    "app.js": "import fs from 'fs';\n\nfunction loadConfig(path) {\n  return JSON.parse("
    "fs.readFileSync(path));\n}\n\nexport class Cache {\n  get(key) { return this.map[key]; }\n}\n",
    "types.ts": "export interface User {\n  name: string;\n}\n\nexport function greet(u: User): "
    "string {\n  return `hi ${u.name}`;\n}\n",
    "main.go": 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello")\n}\n',
    "lib.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    "App.java": "public class App {\n  public static void main(String[] a) {\n    System.out."
    "println(1);\n  }\n}\n",
    "util.c": "#include <stdio.h>\n\nint twice(int x) {\n  return 2 * x;\n}\n",
    "deploy.sh": "#!/bin/sh\nset -eu\nrsync -a build/ server:/srv/site/\n",
}


def pdf_bytes(pages: list[str]) -> bytes:
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def three_page_pdf() -> bytes:
    """Three pages; PDF_PHRASE is on page 2 only."""
    return pdf_bytes(
        [
            "Page one is about tide tables and harbour opening hours.",
            f"Page two. {PDF_PHRASE} Wildlife rangers count them every spring.",
            "Page three lists ferry timetables for the summer season.",
        ]
    )


def encrypted_pdf() -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.cell(0, 10, "hidden")
    pdf.set_encryption(owner_password="owner", user_password="user")
    return bytes(pdf.output())


def image_only_pdf() -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(10, 10, 80, 60, style="F")  # a drawing, no text: what a scan looks like
    return bytes(pdf.output())


def docx_bytes() -> bytes:
    document = docx.Document()
    document.add_heading("Kitchen handbook", level=1)
    document.add_paragraph("Opening notes for new cooks.")
    document.add_heading("Baking", level=2)
    document.add_paragraph("Preheat the oven an hour ahead.")
    document.add_paragraph(DOCX_PHRASE)
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "oven", "temperature"
    table.cell(1, 0).text, table.cell(1, 1).text = "deck", "250 C"
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def notebook_text(cells: list[tuple[str, str]] | None = None) -> str:
    """nbformat 4 JSON with cell ids (outputs included, to show they are dropped)."""
    cells = cells or [
        ("markdown", "# Rainfall analysis\nMonthly totals for the allotment."),
        ("code", "import pandas as pd\nrain = pd.read_csv('rain.csv')"),
        ("code", "rain.groupby('month').sum()"),
    ]
    return json.dumps(
        {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {},
            "cells": [
                {
                    "id": f"cell-{i}",
                    "cell_type": kind,
                    "metadata": {},
                    "source": source.splitlines(keepends=True),
                    **(
                        {
                            "outputs": [
                                {
                                    "output_type": "stream",
                                    "name": "stdout",
                                    "text": ["SECRET OUTPUT\n"],
                                }
                            ],
                            "execution_count": 1,
                        }
                        if kind == "code"
                        else {}
                    ),
                }
                for i, (kind, source) in enumerate(cells)
            ],
        },
        indent=1,
    )


def table_text(delimiter: str = ",") -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    writer.writerows(
        [
            ["city", "country", "note"],
            ["Oslo", "Norway", "fjords, ferries"],
            [CSV_PHRASE, "Portugal", "custard tarts and trams"],
        ]
    )
    return buffer.getvalue()


def write_bytes(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    return path


def png(lines: list[str]) -> bytes:
    """`lines` drawn in black on white with Pillow's own TrueType font, as a PNG."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=30)
    image = Image.new("RGB", (760, 60 + 50 * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((24, 24 + 50 * i), line, font=font, fill="black")
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()
