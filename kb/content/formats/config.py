"""Config files -> one chunk per top-level key or section, located by its key path.

YAML keeps the file's own lines (key positions from the YAML composer); TOML and INI are cut
at their `[section]` lines (validated by tomllib / configparser first); JSON is shown
pretty-printed, one top-level key after another. Anything else that parses (a YAML list, a
multi-document file) is cut into line windows by chunking (`L a-b`).
"""

from __future__ import annotations

import configparser
import json
import re
import tomllib

import yaml

from kb.content.formats.base import FormatError, Parsed, TextBuilder, decode_text, line_blocks
from kb.core.limits import TooComplex, check_yaml, json_loads

_SECTION = re.compile(r"[ \t]*\[\[?[ \t]*([^\]\n]+?)[ \t]*\]\]?[ \t]*(?:[#;].*)?$")


def _sections(text: str) -> Parsed:
    starts = [
        (i, m.group(1), (m.group(1),))
        for i, line in enumerate(text.split("\n"))
        if (m := _SECTION.match(line))
    ]
    return Parsed(text, "config", line_blocks(text, starts))


def read_toml(data: bytes) -> Parsed:
    text = decode_text(data)
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"not valid TOML ({exc})") from None
    return _sections(text)


def read_ini(data: bytes) -> Parsed:
    text = decode_text(data)
    try:
        configparser.ConfigParser(interpolation=None, strict=False).read_string(text)
    except configparser.Error as exc:
        raise FormatError(f"not a valid INI file ({' '.join(str(exc).split())})") from None
    return _sections(text)


def read_yaml(data: bytes) -> Parsed:
    text = decode_text(data)
    try:
        check_yaml(text)
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except TooComplex as exc:
        raise FormatError(f"not read: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        where = f"line {exc.problem_mark.line + 1}: " if exc.problem_mark else ""
        raise FormatError(f"not valid YAML ({where}{exc.problem or exc.context})") from None
    except yaml.YAMLError as exc:
        raise FormatError(f"not valid YAML ({exc})") from None
    if len(nodes) != 1 or not isinstance(nodes[0], yaml.MappingNode):
        return Parsed(text, "config")
    starts = [(key.start_mark.line, str(key.value), (str(key.value),)) for key, _ in nodes[0].value]
    return Parsed(text, "config", line_blocks(text, starts))


def read_json(data: bytes) -> Parsed:
    try:
        value = json_loads(decode_text(data))
    except json.JSONDecodeError as exc:
        raise FormatError(f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except TooComplex as exc:
        raise FormatError(f"not read: {exc}") from None
    if not isinstance(value, dict) or not value:
        return Parsed(json.dumps(value, indent=2, ensure_ascii=False) + "\n", "config")
    out = TextBuilder()
    out.add("{\n")
    for i, (key, item) in enumerate(value.items()):
        shown = json.dumps(item, indent=2, ensure_ascii=False).replace("\n", "\n  ")
        comma = "," if i + 1 < len(value) else ""
        out.block(f"  {json.dumps(key, ensure_ascii=False)}: {shown}{comma}", key, (key,))
        out.add("\n")
    out.add("}\n")
    return Parsed(out.text, "config", out.blocks)
