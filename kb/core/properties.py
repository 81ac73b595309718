"""Which frontmatter keys fill which field of a note (the setting NOTE_PROPERTIES): for each field,
the keys looked at in order, the first one present winning.

Obsidian users name the same things under other keys than this project's own (`aliases`,
`description`, `created`, `date`), so those are read too by default; a user's own mapping names
only the fields it changes: `topic=summary|abstract` keeps the defaults of the other fields.
"""

from __future__ import annotations

from collections.abc import Mapping

FIELDS = ("tags", "aliases", "topic", "document_date")
DEFAULT = (
    "tags=tags|tag,aliases=aliases|alias,topic=topic|description|summary,"
    "document_date=document_date|date|created|updated"
)
Properties = Mapping[str, tuple[str, ...]]


def parse(value: str, base: Properties | None = None) -> dict[str, tuple[str, ...]]:
    """`field=key|key,...` as {field: keys} over `base` (the defaults); ValueError naming the
    entry at fault."""
    out = dict(DEFAULTS if base is None else base)
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, keys = entry.partition("=")
        name = name.strip()
        if not sep or name not in FIELDS:
            raise ValueError(
                f"{entry!r} is not field=key|key (fields: {', '.join(FIELDS)}), "
                "e.g. topic=topic|description"
            )
        found = tuple(k.strip() for k in keys.split("|") if k.strip())
        if not found:
            raise ValueError(f"{entry!r} names no frontmatter key for {name}")
        out[name] = found
    return out


DEFAULTS: dict[str, tuple[str, ...]] = {}
DEFAULTS = parse(DEFAULT, base={})
