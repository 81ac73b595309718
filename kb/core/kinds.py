"""The file kinds the product knows, by suffix, and the names never indexed: one table that the
settings (INDEX_EXTENSIONS), the listing gates (kb.sources.files) and the readers
(kb.content.formats, one module per kind) all read. A new file kind is one row here and its
reader module there (kb.content.formats checks at import that every reader has its row).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Literal

Domain = Literal["prose", "code"]
PROSE: Domain = "prose"
CODE: Domain = "code"

# suffix -> (the reader that reads it, in kb.content.formats; the collection its chunks go to).
# "note": Markdown and text with frontmatter (kb.content.notes); "code": tree-sitter's grammar for
# the suffix when its wheel is installed, else line windows.
KINDS: dict[str, tuple[str, Domain]] = {
    ".md": ("note", PROSE), ".txt": ("note", PROSE),
    ".pdf": ("pdf", PROSE), ".docx": ("word", PROSE),
    ".html": ("webpage", PROSE), ".htm": ("webpage", PROSE),
    ".csv": ("table", PROSE), ".tsv": ("table", PROSE),
    ".yaml": ("config", PROSE), ".yml": ("config", PROSE), ".toml": ("config", PROSE),
    ".json": ("config", PROSE), ".ini": ("config", PROSE), ".canvas": ("canvas", PROSE),
    # the text in them, by OCR (kb.content.ocr), while OCR is on; not indexed by default
    ".png": ("image", PROSE), ".jpg": ("image", PROSE), ".jpeg": ("image", PROSE),
    ".webp": ("image", PROSE), ".heic": ("image", PROSE),
    ".ipynb": ("notebook", CODE), ".py": ("pycode", CODE),
    ".js": ("code", CODE), ".jsx": ("code", CODE), ".mjs": ("code", CODE),
    ".ts": ("code", CODE), ".tsx": ("code", CODE), ".go": ("code", CODE), ".rs": ("code", CODE),
    ".java": ("code", CODE), ".c": ("code", CODE), ".h": ("code", CODE), ".cpp": ("code", CODE),
    ".cc": ("code", CODE), ".hpp": ("code", CODE), ".sh": ("code", CODE), ".bash": ("code", CODE),
    # code without a grammar wheel here: known, read as line windows, not indexed by default
    ".kt": ("code", CODE), ".rb": ("code", CODE), ".php": ("code", CODE),
    ".swift": ("code", CODE), ".scala": ("code", CODE), ".lua": ("code", CODE),
    ".sql": ("code", CODE),
}  # fmt: skip
NOT_BY_DEFAULT = (".kt", ".rb", ".php", ".swift", ".scala", ".lua", ".sql")
IMAGES = tuple(s for s, (reader, _) in KINDS.items() if reader == "image")  # read only by OCR
TEXT_NOTES = tuple(s for s, (reader, _) in KINDS.items() if reader == "note")
KNOWN = tuple(KINDS)
# INDEX_EXTENSIONS' default: every kind above but code this image has no grammar for, and images
# (opted into: OCR costs CPU seconds per picture, and most photos hold no text; docs/guide/ocr.md)
DEFAULT_EXTENSIONS = ",".join(s for s in KINDS if s not in NOT_BY_DEFAULT + IMAGES)

# never indexed, whatever INDEX_EXTENSIONS says: secrets and keys
SECRET_FILES = (".env", ".env.*", "*.env", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks",
                "*.keystore", "*.kdbx", "*.gpg", "*.asc", "id_rsa*", "id_dsa*", "id_ecdsa*",
                "id_ed25519*", ".netrc", ".pgpass", "credentials*.json")  # fmt: skip


def is_secret(name: str) -> bool:
    lowered = name.lower()
    return any(fnmatchcase(lowered, pattern) for pattern in SECRET_FILES)


def suffix_of(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def domain_of(name: str) -> Domain:
    """The collection a file's chunks go to: code (code, notebooks) or prose (the rest)."""
    found = KINDS.get(suffix_of(name))
    return found[1] if found else PROSE
