"""Every setting the host scripts and the MCP server read, but a kind of source's own: those are
in its module, a KindSettings model read the same way (Settings.of; kb.sources.registry lists
them all).

Field names are the environment variable names. Values come from the environment, then from
`.env` at the repository root, then the defaults below. Relative paths (NOTES_DIR, QDRANT_PATH,
STATE_DIR, the folders of NOTE_FOLDERS) are resolved against the repository root, where `.env`
is read, whatever the current folder. docs/guide/configuration.md and `.env.example` list
exactly these names and the kinds' (a test keeps them in sync).

`SETTINGS_ENV_FILE` is not a setting: it names another file to read instead of the repository's
`.env`. The test suite points it at an empty file, for itself and every process it starts, so a
developer's `.env` cannot change test results.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Self, TypeVar

from pydantic import AfterValidator, Field, PrivateAttr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kb.core import kinds, properties
from kb.core.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_FILE_VARIABLE = "SETTINGS_ENV_FILE"
DEFAULT_STORAGE = "qdrant_data"  # embedded storage when nothing names a Qdrant server
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Marks a setting that adds notes to the index (a source: the inbox, folders, playlists, pages),
# so what must be emptied to index nothing of the user's (ingest_check.py) is read from the
# fields themselves; tests/unit/ingest/test_ingest_check.py checks no other setting adds a source.
SOURCE: dict[str, Any] = {"source": True}


def log_level(value: str) -> str:
    """LOG_LEVEL in any case, as the logging module names it; ValueError for another word."""
    level = value.strip().upper()
    if level not in LOG_LEVELS:
        raise ValueError(f"{value!r} is not a logging level (one of {', '.join(LOG_LEVELS)})")
    return level


def env_file() -> Path:
    """The `.env` file settings are read from: the repository's, or the one SETTINGS_ENV_FILE
    names (looked up when settings are built, not when this module is imported)."""
    return Path(os.environ.get(ENV_FILE_VARIABLE) or REPO_ROOT / ".env")


class FromEnv(BaseSettings):
    """How every settings model is read: field names are the environment variable names (case
    sensitive), values from the environment, then the `.env` file (env_file()), then defaults;
    names it does not declare are ignored."""

    model_config = SettingsConfigDict(
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=True,
    )

    def __init__(self, **values: Any) -> None:
        # `_env_file=None` (no file) or another file given explicitly still wins.
        values.setdefault("_env_file", env_file())
        super().__init__(**values)


class KindSettings(FromEnv):
    """A kind of source's own settings (kb.sources.kind.Kind.settings_model), declared in the
    kind's module and read as Settings is (Settings.of): same variables, same `.env`; SOURCE on
    the fields that add notes."""


K = TypeVar("K", bound=KindSettings)


class Settings(FromEnv):
    # what Settings was given for names it does not declare (a kind's: Settings(MAIL=...)),
    # and the `.env` it read: what Settings.of hands a kind's model
    _given: dict[str, Any] = PrivateAttr(default_factory=dict)

    def __init__(self, **values: Any) -> None:
        values.setdefault("_env_file", env_file())
        given = {k: v for k, v in values.items() if k not in type(self).model_fields}
        super().__init__(**values)
        self._given = given

    def of(self, model: type[K]) -> K:
        """A kind's own settings, read as these were: the environment, the same `.env`, and the
        values Settings was given (or model_copy updated) for its names; ConfigError naming
        each invalid one."""
        values = {k: v for k, v in self._given.items() if k in model.model_fields or k[0] == "_"}
        try:
            return model(**values)
        except ValidationError as exc:
            raise ConfigError(describe_invalid(exc)) from None

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's copy; a name Settings does not declare (a kind's) goes to `of`."""
        fields = dict(update or {})
        given = {k: fields.pop(k) for k in list(fields) if k not in type(self).model_fields}
        copied = super().model_copy(update=fields, deep=deep)
        copied._given = self._given | given
        return copied

    def __eq__(self, other: object) -> bool:
        # the values, not where they were read from (`_env_file`)
        return (
            isinstance(other, Settings)
            and self.__dict__ == other.__dict__
            and _values(self._given) == _values(other._given)
        )

    # --- embedder client -------------------------------------------------------------
    EMBED_URL: str = Field("http://localhost:8080", description="Base URL of the embedder.")
    EMBED_BATCH_SIZE: int = Field(16, ge=1, description="Most texts the client sends per request.")
    EMBED_MAX_CHARS: int = Field(
        1500,
        ge=1,
        description="Per-text character budget: a request carries at most "
        "EMBED_BATCH_SIZE x EMBED_MAX_CHARS characters.",
    )
    EMBED_TIMEOUT: float = Field(120.0, gt=0, description="Seconds to wait for one request.")
    EMBED_RETRIES: int = Field(
        5, ge=0, description="Retries on connection errors, 429 and 503 (bounded backoff)."
    )
    EMBED_LANGUAGES: str = Field(
        "",
        pattern=r"^\s*((all|\*)|[a-zA-Z]{2}(\s*,\s*[a-zA-Z]{2})*)?\s*$",
        description="Languages the embedder's EMBED_MODEL covers, ISO 639-1 codes separated by "
        "commas (en,de), or all; hybrid search weighs the meaning side down for a query in "
        "another language (docs/design/search.md). Empty: known from the model's name "
        "(MiniLM: en; Qwen3-Embedding: all; a model not known: all).",
    )
    # --- second stage: the embedder's cross-encoder (docs/design/reranking.md) ----------------
    RERANK_CANDIDATES: int = Field(
        30,
        ge=1,
        le=100,
        description="First-stage results the reranker reads per search (cost grows with it: "
        "bench/rerank.py). Searches rerank by default when the embedder serves a reranker.",
    )
    RERANK_MAX_CHARS: int = Field(
        1200,
        ge=100,
        description="Characters of each passage (title and headings first) sent to the reranker.",
    )
    RERANK_WEIGHT: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Blend of the reranker's rank with the first stage's (weighted reciprocal "
        "rank): 1 = the reranker's order alone, 0 = the first stage's; 0.5 guards against a "
        "reranker weaker than the embedder (docs/design/reranking.md). bench/retrieval.py --rerank "
        "measures it.",
    )
    RERANK_TIMEOUT: float = Field(
        30.0,
        gt=0,
        description="Seconds a search waits for the reranker before it keeps the first-stage "
        "order (with a note in the result).",
    )
    # --- answer_question / query.py --answer without MCP sampling (kb.search.answer) -----------
    LLM_URL: str = Field(
        "",
        description="OpenAI-compatible chat endpoint base that writes cited answers when the MCP "
        "client cannot sample (e.g. http://localhost:11434/v1 for Ollama); empty: none.",
    )
    LLM_MODEL: str = Field("", description="Model name sent to LLM_URL (empty: none sent).")
    LLM_API_KEY: str = Field("", description="Bearer key for LLM_URL, if it needs one.")
    LLM_TIMEOUT: float = Field(120.0, gt=0, description="Seconds to wait for LLM_URL's answer.")
    EMBED_API_KEY: str = Field(
        "",
        description="Key the embedder requires (the embedder's own EMBED_API_KEY), sent as "
        "'Authorization: Bearer <key>'; empty: none.",
    )

    # --- vector store ----------------------------------------------------------------
    QDRANT_URL: str = Field(
        "http://localhost:6333",
        description="Qdrant server URL; set (or QDRANT_API_KEY set), storage is this server.",
    )
    QDRANT_PATH: str = Field(
        "",
        description="Folder for embedded Qdrant (no server); set this or QDRANT_URL, not both. "
        f"Empty: {DEFAULT_STORAGE}/ unless QDRANT_URL or QDRANT_API_KEY (a server's key, which "
        "`make up` writes) is set.",
    )
    QDRANT_SHARDS: int = Field(
        1, ge=1, description="Shards of a new collection on a Qdrant cluster (shard_number)."
    )
    QDRANT_REPLICATION: int = Field(
        1, ge=1, description="Copies of each shard on a Qdrant cluster (replication_factor)."
    )
    QDRANT_WRITE_CONSISTENCY: int = Field(
        1,
        ge=1,
        description="Replicas that must acknowledge a write (write_consistency_factor).",
    )
    QDRANT_API_KEY: str = Field(
        "",
        description="Qdrant's API key: the stack's read-write key, which `make keys` creates in "
        ".env (docs/guide/security.md); empty: none.",
    )
    COLLECTION: str = Field("notes", min_length=1, description="Qdrant collection name.")
    CODE_COLLECTION: str = Field(
        "code",
        min_length=1,
        description="Collection of code and notebooks (kb.content.formats), searched "
        "beside COLLECTION.",
    )
    CODE_EMBED_MODEL: str = Field(
        "",
        description="Model the code collection is embedded with (the embedder must serve it: "
        "its EMBED_CODE_MODEL); empty: the embedder's EMBED_MODEL.",
    )

    # --- notes -----------------------------------------------------------------------
    NOTES_DIR: Path = Field(
        REPO_ROOT / "data",
        description="Inbox of notes; ingested notes move to NOTES_DIR/ingested.",
        json_schema_extra=SOURCE,
    )
    NOTE_MAX_BYTES: int = Field(
        5_000_000,
        ge=1,
        description="Notes larger than this (bytes) are reported and left in place, not ingested.",
    )

    INDEX_EXTENSIONS: str = Field(
        kinds.DEFAULT_EXTENSIONS,
        description="Comma-separated file suffixes that are indexed (docs/design/formats.md lists "
        "each kind and its locator); secrets (.env, *.pem, *.key ...) never are.",
    )

    OCR: bool = Field(
        True,
        description="Read the text in PDF pages without a text layer, and in images (.png .jpg "
        ".jpeg .webp .heic) when INDEX_EXTENSIONS lists them, once per content hash "
        "(STATE_DIR/ocr-cache.sqlite3); off: no image is indexed (docs/guide/ocr.md).",
    )

    NOTE_FOLDERS: str = Field(
        "",
        description="Folders indexed in place (never moved or written): comma-separated "
        "name=path pairs, e.g. vault=~/Obsidian/Main,handbook=~/src/handbook; the name defaults "
        "to the folder's own name and starts each result's source (vault/projects/kimchi.md).",
        json_schema_extra=SOURCE,
    )
    NOTE_FOLDERS_GIT: bool = Field(
        True,
        description="In a NOTE_FOLDERS folder that is a git work tree, index only the files git "
        "would track (.gitignore honoured).",
    )
    NOTE_FOLDERS_MAX_DELETE: float = Field(
        0.5,
        ge=0,
        le=1,
        description="A sync that would soft-delete more than this share of a folder's notes stops "
        "until confirmed with `ingest.py --allow-deletes` (an unmounted drive looks empty).",
    )
    PURGE_AFTER_DAYS: int = Field(
        90,
        ge=0,
        description="`ingest.py --purge-deleted` deletes for good the notes soft-deleted more "
        "than this many days ago; 0: every soft-deleted note.",
    )

    NOTE_PROPERTIES: str = Field(
        properties.DEFAULT,
        description="Which frontmatter keys fill which field of a note, the first key present "
        "winning: comma-separated field=key|key entries for tags, aliases, topic and "
        "document_date (fields left out keep these defaults; docs/guide/obsidian.md).",
    )

    PRIVATE_TAGS: str = Field(
        "",
        description="Comma-separated tags that make a note private, like 'private: true' in its "
        "frontmatter: never embedded or stored, and removed from the index on the next sync "
        "(e.g. health,journal; compared as tags are: case and spacing ignored).",
    )

    STATE_DIR: Path = Field(
        REPO_ROOT / "state",
        description="The project's own state, never inside the notes: the ingest lock, the "
        "embedding cache and the run log.",
    )
    EMBED_CACHE: bool = Field(
        True,
        description="Reuse document vectors by content hash (STATE_DIR/embed-cache.sqlite3), so "
        "unchanged text is never embedded twice.",
    )

    # --- MCP server ------------------------------------------------------------------
    MCP_HOST: str = Field("127.0.0.1", description="Interface the MCP server binds.")
    MCP_PORT: int = Field(8000, ge=1, le=65535, description="Port the MCP server listens on.")
    MCP_ALLOWED_HOSTS: str = Field(
        "",
        description="Comma-separated Host values accepted besides localhost:PORT and "
        "127.0.0.1:PORT (always accepted).",
    )
    MCP_ALLOWED_ORIGINS: str = Field(
        "",
        description="Comma-separated Origin values accepted besides http://localhost:PORT and "
        "http://127.0.0.1:PORT (always accepted).",
    )
    MCP_DISABLE_HOST_CHECK: bool = Field(
        False, description="Turn off Host/Origin validation (DNS-rebinding protection). Unsafe."
    )
    MCP_TOKEN: str = Field("", description="If set, every MCP request needs 'Bearer <token>'.")
    MCP_WRITE_TOOLS: bool = Field(
        False,
        description="Offer the MCP tools that change the collection (`delete_note`, "
        "`restore_note`, `save_note`, `save_url`, `sync`); off: the server only reads.",
    )
    MCP_WATCH: bool = Field(
        False,
        description="The MCP server also watches NOTES_DIR and NOTE_FOLDERS, as `ingest.py "
        "--watch` does, sharing its store (embedded storage opens in one process only).",
    )
    MCP_URL: str = Field(
        "",
        description="MCP endpoint that mcp/check.py and query.py connect to; empty: "
        "http://MCP_HOST:MCP_PORT/mcp (127.0.0.1 when MCP_HOST is 0.0.0.0, localhost when ::).",
    )

    LOG_LEVEL: Annotated[str, AfterValidator(log_level)] = Field(
        "INFO",
        description="Python logging level for scripts and servers: DEBUG, INFO, WARNING, ERROR or "
        "CRITICAL, any case.",
    )

    @model_validator(mode="after")
    def _one_store(self) -> Settings:
        # No silent fallback between a server and embedded storage: both set is a mistake.
        if self.QDRANT_PATH and "QDRANT_URL" in self.model_fields_set:
            raise ValueError("set QDRANT_URL or QDRANT_PATH, not both")
        # One default for every entry point (scripts, the MCP server, make local): embedded
        # storage, unless something names a server; a Qdrant key is only ever a server's.
        if not (self.QDRANT_PATH or "QDRANT_URL" in self.model_fields_set or self.QDRANT_API_KEY):
            self.QDRANT_PATH = DEFAULT_STORAGE
        # against the repository root, like .env itself: `cd data && uv run ../query.py`
        # must find the same storage as a run from the root
        self.NOTES_DIR = from_root(self.NOTES_DIR)
        self.STATE_DIR = from_root(self.STATE_DIR)
        if self.QDRANT_PATH:
            self.QDRANT_PATH = str(from_root(Path(self.QDRANT_PATH)))
        return self

    @property
    def index_extensions(self) -> tuple[str, ...]:
        """INDEX_EXTENSIONS as lowercase suffixes, less the images while OCR is off."""
        return tuple(
            suffix
            for suffix in (e.strip().lower() for e in self.INDEX_EXTENSIONS.split(","))
            if suffix and (self.OCR or suffix not in kinds.IMAGES)
        )

    @model_validator(mode="after")
    def _two_collections(self) -> Settings:
        if self.CODE_COLLECTION == self.COLLECTION:
            raise ValueError(
                f"CODE_COLLECTION: {self.CODE_COLLECTION!r} is COLLECTION too; code and notes "
                "need collections of their own"
            )
        return self

    @property
    def note_properties(self) -> dict[str, tuple[str, ...]]:
        """NOTE_PROPERTIES as {field: frontmatter keys} (checked when the settings are read)."""
        return properties.parse(self.NOTE_PROPERTIES)

    @model_validator(mode="after")
    def _properties(self) -> Settings:
        try:
            properties.parse(self.NOTE_PROPERTIES)
        except ValueError as exc:
            raise ValueError(f"NOTE_PROPERTIES: {exc}") from None
        return self

    @model_validator(mode="after")
    def _known_extensions(self) -> Settings:
        for suffix in self.index_extensions:
            if suffix not in kinds.KNOWN or kinds.is_secret(f"x{suffix}"):
                raise ValueError(
                    f"INDEX_EXTENSIONS: {suffix!r} is not a file kind that can be indexed "
                    f"(known: {' '.join(kinds.KNOWN)})"
                )
        return self

    @property
    def mcp_url(self) -> str:
        """MCP_URL, else the endpoint of a server started with these settings: one port setting
        for the server and its clients. A server bound to every interface is reached on
        loopback, under a name its default Host check accepts."""
        if self.MCP_URL:
            return self.MCP_URL
        host = {"0.0.0.0": "127.0.0.1", "::": "localhost", "": "127.0.0.1"}.get(
            self.MCP_HOST, self.MCP_HOST
        )
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        return f"http://{host}:{self.MCP_PORT}/mcp"


def _values(given: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in given.items() if k[0] != "_"}


def source_settings(model: type[FromEnv]) -> tuple[str, ...]:
    """The settings of `model` marked SOURCE: those that add notes to the index
    (kb.sources.registry.source_settings: Settings' and every kind's)."""
    return tuple(
        name
        for name, field in model.model_fields.items()
        if isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get("source")
    )


def from_root(path: Path) -> Path:
    """A path setting (`~` expanded) resolved against the repository root."""
    return (REPO_ROOT / path.expanduser()).resolve()


@lru_cache
def get_settings() -> Settings:
    """Settings read once per process (tests build `Settings(...)` directly instead).

    Raises ConfigError naming every invalid setting.
    """
    try:
        return Settings()
    except ValidationError as exc:
        raise ConfigError(describe_invalid(exc)) from None


def describe_invalid(exc: ValidationError) -> str:
    """Every invalid setting with its problem, for a one-line `error: ...` from a script."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg'].removeprefix('Value error, ')}"
        for e in exc.errors()
    )
