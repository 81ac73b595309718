"""The chunk record: what one Qdrant point holds, in one place.

Every point is one chunk of one note: a dense vector (`DENSE`), a keyword vector (`KEYWORD`) and
a payload whose keys are exactly the fields of `ChunkRecord`. Its id is derived from (source,
chunk index), so writing a note again overwrites its points instead of adding copies. The payload
indexes filters and facets need are declared here too, as plain kinds (kb.store creates them).
`KeywordVector` is the sparse vector beside the dense one. `Hit` is a search result: the fields
of a record a user sees, plus its score. Bump SCHEMA_VERSION when the payload layout changes:
collections made by another version are re-created by the next `ingest.py --rebuild`.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from kb.core.invisible import strip_invisible

# payload layout, recorded in the collection metadata (2: keyword, folders; 3: origin, deleted_*;
# 4: tags from the body with their parents, aliases, links, unresolved_links). A note written by
# another version is written again by the next ingest, its vectors from the embedding cache where
# its embedded text did not change (kb.embedding.cache).
SCHEMA_VERSION = 4

DENSE = "dense"  # name of the dense vector
KEYWORD = "keyword"  # name of the sparse keyword (BM25) vector beside it


@dataclass(frozen=True)
class KeywordVector:
    """A sparse vector (the `KEYWORD` vector of a point, or a query's): term ids, ascending,
    and their weights (kb.embedding.keywords makes them, kb.store stores and queries them)."""

    indices: list[int]
    values: list[float]
    # a query's only: it is a lookup (kb.embedding.keywords.is_lookup), whose keyword match
    # hybrid search weighs more (kb.store.query.fusion)
    lookup: bool = False
    # a query's only: its distinct words (one may be searched in several languages' forms, each
    # a term of `indices`): the keyword bonus's scale. 0: as many as `indices`.
    words: int = 0
    # a query's only: how much its cosine counts in hybrid fusion (kb.store.query.fusion), below
    # 1 when the embedding model does not cover the query's language (kb.search.query.trust)
    semantic: float = 1.0


INBOX = "inbox"  # the origin of notes from the NOTES_DIR inbox
NOTE = "note"  # the kind of an item read from a file
VIDEO = "video"  # the kind of a video of a YouTube playlist (kb.sources.youtube.playlist)
WEB = "web"  # the kind of a web page: a bookmark's (kb.sources.web) or one saved as a note
PLAYLIST_REMOVED = "playlist_removed"  # deleted_cause of a video removed from its playlist
BOOKMARK_REMOVED = "bookmark_removed"  # deleted_cause of a page whose bookmark was removed
FILE_DELETED = "file_deleted"  # deleted_cause of a note whose file left its folder
MESSAGE_REMOVED = "message_removed"  # deleted_cause of a message gone from its mailbox
EMAIL = "email"  # the kind of a message of a MAIL mailbox (kb.sources.mail)
USER_DELETED = "user"  # deleted_cause of a note deleted by hand (kb.ingest.lifecycle)
# kb.store.points.fingerprints marks each point of a soft-deleted note so: never "unchanged"
# (kb.ingest.plan)
DELETED_MARK = "deleted:"
# ... and each point of a note restored by hand: never "gone" while its file stays away
# (kb.ingest.plan)
RESTORED_MARK = "restored:"
# Words first, meaning next (kb.ingest.run): a note's points are stored with their keyword vector
# alone and payload EMBEDDING = PENDING, found by keyword (and hybrid) search within seconds; its
# dense vector is written later over the same point, without the field. Qdrant keeps a point whose
# named dense vector is absent out of dense results. The field is storage state, not the note's:
# never part of ChunkRecord or a fingerprint. kb.store.points.fingerprints puts PENDING_MARK
# (after any lifecycle mark) before such a point's fingerprint, so the next run embeds it.
EMBEDDING = "embedding"
PENDING = "pending"
PENDING_MARK = "pending:"

# the heading path of a video's caption passages, whose locator is the time they start at
# ("12:34", kb.sources.youtube.captions): a result's `url` then opens the video at that moment
TRANSCRIPT = "Transcript"
_CLOCK = re.compile(r"(?:(\d+):)?(\d{1,2}):(\d{2})")

_ID_NAMESPACE = uuid.UUID("6f1d7a52-3c1e-4b5f-9a57-0c3e2b8f4d11")


@dataclass(frozen=True)
class ChunkRecord:
    """The payload of one point; field names are the payload keys."""

    text: str  # the chunk as it stands in the note (what results show)
    source: str  # the note's path relative to its source's root, POSIX separators
    folders: list[str]  # every folder above the note (see `folders_of`): path filters
    title: str  # the note's first `#` heading, else its file name
    heading_path: list[str]  # headings above the chunk, outermost first
    chunk_index: int  # position in the note, from 0
    tags: list[str]  # normalised tags, frontmatter and body, each nested one's parents too
    topic: str | None
    document_date: str | None  # ISO 8601
    char_start: int  # locators: character offsets and 1-based lines in the note file
    char_end: int
    line_start: int
    line_end: int
    date_ingested: str | None = None  # UTC, ISO 8601: when the note was written
    note_hash: str | None = None  # the note's fingerprint (see `fingerprint`)
    origin: str = INBOX  # the source it came from: "inbox" or a NOTE_FOLDERS name
    deleted_at: str | None = None  # UTC, ISO 8601: soft-deleted then (hidden from searches)
    deleted_cause: str | None = None  # why: "file_deleted" (its file left its folder), "user"
    restored_at: str | None = None  # UTC, ISO 8601: restored by hand then (kb.ingest.lifecycle)
    # what the item is: "note" (a file), "video" (kb.sources.youtube.playlist) or "web" (a page);
    # points written before the field existed are notes. The fields below are a video's (None
    # for a note; a web page has `url`).
    kind: str = NOTE
    channel: str | None = None
    url: str | None = None
    duration_s: int | None = None
    view_count: int | None = None
    uploaded: str | None = None  # ISO 8601 date-time (UTC) of the upload
    categories: list[str] = field(default_factory=list)
    language: str | None = None
    thumbnail: str | None = None
    # where in the item a reader finds the chunk: heading path, "p. 2", "row 17", "L 12-40"
    locator: str = ""
    domain: str = "prose"  # prose (notes, documents, tables, config) or code (kb.content.formats)
    # a web page's (kind "web"; `url` is its canonical link, `document_date` its published date)
    site: str | None = None
    author: str | None = None
    fetched_at: str | None = None  # UTC, ISO 8601: when the page was fetched
    bookmark_folders: list[str] = field(default_factory=list)  # "Bookmarks bar/Read later"
    folder_keys: list[str] = field(default_factory=list)  # the `folder` filter's (`folder_keys`)
    # a message's (kind "email", kb.sources.mail): addresses lowercased, the thread's first
    # message id (Gmail's thread id when it has one)
    sender: str | None = None
    recipients: list[str] = field(default_factory=list)
    thread: str | None = None
    # a vault's graph (kb.content.obsidian): the note's other names, the sources of the indexed
    # notes it links to, and what its links to notes that are not indexed name
    aliases: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    unresolved_links: list[str] = field(default_factory=list)
    # the file as it was read (os.stat): a result is stale when the file differs now
    # (kb.search.fresh); never part of a fingerprint, so touching a file re-embeds nothing
    file_mtime_ns: int | None = None  # nanoseconds: an integer stores exactly
    file_size: int | None = None
    file_sha256: str | None = None

    def payload(self) -> dict[str, Any]:
        return asdict(self)


PAYLOAD_FIELDS = frozenset(f.name for f in fields(ChunkRecord))
SOURCE = "source"
FOLDERS = "folders"
TAGS = "tags"
CHUNK_INDEX = "chunk_index"
DOCUMENT_DATE = "document_date"
DATE_INGESTED = "date_ingested"
NOTE_HASH = "note_hash"
ORIGIN = "origin"
DELETED_AT = "deleted_at"
DELETED_CAUSE = "deleted_cause"
RESTORED_AT = "restored_at"
FILE_MTIME = "file_mtime_ns"
FILE_SIZE = "file_size"
FILE_SHA256 = "file_sha256"
FILE_FIELDS = (FILE_MTIME, FILE_SIZE, FILE_SHA256)
KIND = "kind"
CHANNEL = "channel"
DURATION_S = "duration_s"
VIEW_COUNT = "view_count"
UPLOADED = "uploaded"
CATEGORIES = "categories"
LANGUAGE = "language"
TITLE = "title"
SITE = "site"
FOLDER_KEYS = "folder_keys"
SENDER = "sender"
RECIPIENTS = "recipients"
THREAD = "thread"
ALIASES = "aliases"
LINKS = "links"
UNRESOLVED = "unresolved_links"
# what a soft delete sets and a restore clears or sets: never part of a note's fingerprint
LIFECYCLE = (DELETED_AT, DELETED_CAUSE, RESTORED_AT)
assert {SOURCE, FOLDERS, TAGS, CHUNK_INDEX, DOCUMENT_DATE, DATE_INGESTED, NOTE_HASH, ORIGIN,
        *LIFECYCLE} <= PAYLOAD_FIELDS  # fmt: skip

# Every field a filter or facet uses, and the kind of index it gets. A server needs these (it
# refuses to filter or facet without them); kb.store.collection creates them.
IndexKind = Literal["keyword", "integer", "datetime"]
PAYLOAD_INDEXES: dict[str, IndexKind] = {
    SOURCE: "keyword",
    FOLDERS: "keyword",
    TAGS: "keyword",
    CHUNK_INDEX: "integer",
    DOCUMENT_DATE: "datetime",
    DATE_INGESTED: "datetime",
    ORIGIN: "keyword",
    DELETED_AT: "datetime",
    DELETED_CAUSE: "keyword",
    # video filters (search_notes) and browse_notes' order_by (range indexes: integer, datetime)
    KIND: "keyword",
    CHANNEL: "keyword",
    DURATION_S: "integer",
    VIEW_COUNT: "integer",
    UPLOADED: "datetime",
    CATEGORIES: "keyword",
    LANGUAGE: "keyword",
    # web pages (kb.sources.web): the `folder` filter, and their site
    FOLDER_KEYS: "keyword",
    SITE: "keyword",
    # messages (kb.sources.mail): the `sender` and `recipient` filters, a thread's messages
    SENDER: "keyword",
    RECIPIENTS: "keyword",
    THREAD: "keyword",
    LINKS: "keyword",  # backlinks: the notes whose links name a note
    EMBEDDING: "keyword",  # points waiting for their dense vector (status counts them)
}


# fields added after SCHEMA_VERSION 3: left out of a fingerprint while they hold their default,
# so notes stored before them stay unchanged (not rewritten) after an upgrade
_LATER = frozenset({KIND, CHANNEL, "url", DURATION_S, VIEW_COUNT, UPLOADED, CATEGORIES,
                    LANGUAGE, "thumbnail", "locator", "domain", SITE, "author", "fetched_at",
                    "bookmark_folders", FOLDER_KEYS, ALIASES, LINKS, UNRESOLVED,
                    SENDER, RECIPIENTS, THREAD})  # fmt: skip
_DEFAULTS: dict[str, object] = {
    f.name: f.default_factory() if callable(f.default_factory) else f.default
    for f in fields(ChunkRecord)
    if f.name in _LATER
}


@dataclass(frozen=True)
class FileStat:
    """A note's file as it was indexed (payload FILE_FIELDS): kb.search.fresh compares it with the
    file now, the size and time first, the content only when the time alone changed."""

    mtime_ns: int
    size: int
    sha256: str

    @classmethod
    def of(cls, path: Path) -> FileStat | None:
        """The file's stat and content hash; None when it cannot be read."""
        try:
            found = path.stat()
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        except (OSError, ValueError):
            return None
        return cls(found.st_mtime_ns, found.st_size, digest.hexdigest())

    @classmethod
    def stored(cls, payload: dict[str, Any]) -> FileStat | None:
        mtime, size, sha = (payload.get(key) for key in FILE_FIELDS)
        if not isinstance(mtime, int) or not isinstance(size, int) or not isinstance(sha, str):
            return None
        return cls(mtime, size, sha)


def at_moment(url: str | None, heading_path: list[str], locator: str) -> str | None:
    """A caption passage's link opens its video where it starts: `…watch?v=ID&t=754s`."""
    clock = _CLOCK.fullmatch(locator)
    if url is None or heading_path != [TRANSCRIPT] or clock is None:
        return url
    hours, minutes, seconds = (int(g or 0) for g in clock.groups())
    return f"{url}{'&' if '?' in url else '?'}t={hours * 3600 + minutes * 60 + seconds}s"


def folder_key(path: str) -> str:
    """A bookmark folder path as the `folder` filter compares it: case, spacing and slashes at
    either end ignored (`" Read Later/ "` -> `"read later"`)."""
    parts = [" ".join(p.split()).casefold() for p in path.split("/")]
    return "/".join(p for p in parts if p)


def folder_keys(paths: list[list[str]]) -> list[str]:
    """Every run of consecutive folders of each path, as `folder_key`s: a bookmark in
    `Bookmarks bar/Read later/Rust` matches `read later`, `read later/rust`, `bookmarks bar` ...
    (Qdrant matches keywords exactly, never by part)."""
    keys: set[str] = set()
    for path in paths:
        names = [folder_key(name) for name in path if folder_key(name)]
        keys.update("/".join(names[i:j]) for i in range(len(names))
                    for j in range(i + 1, len(names) + 1))  # fmt: skip
    return sorted(keys)


def leaf_tags(tags: list[str]) -> list[str]:
    """The tags a result shows: a parent stored for a nested tag (`project` beside
    `project/alpha`) is implied by it."""
    return [t for t in tags if not any(o.startswith(t + "/") for o in tags)]


def point_id(source: str, chunk_index: int) -> str:
    """Deterministic point id of a note's chunk (a UUID, as Qdrant requires)."""
    return str(uuid.uuid5(_ID_NAMESPACE, f"{source}\x00{chunk_index}"))


def folders_of(source: str) -> list[str]:
    """Every folder above a note: `a/b/c.md` -> `["a", "a/b"]` (the payload field `folders`).

    Qdrant matches keywords exactly, never by prefix, so a path filter looks a folder up here.
    """
    parts = source.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def fingerprint(
    model: str, dimensions: int, tokenizer_version: int, points: list[tuple[str, str, ChunkRecord]]
) -> str:
    """Hash of everything a note's points hold except the ingest date and the hash itself, from
    (point id, embedded text, record) per chunk: equal fingerprints mean rewriting the note would
    change nothing but that date. A soft delete (`LIFECYCLE` fields) is not part of it, nor a
    video's view count, nor the file's modification time and size."""
    # a video's view count is refreshed in place (kb.sources.youtube.playlist), not a change of it
    left_out = (DATE_INGESTED, NOTE_HASH, VIEW_COUNT, *FILE_FIELDS, *LIFECYCLE)
    written = [
        [
            pid,
            text,
            {
                k: v
                for k, v in r.payload().items()
                if k not in left_out and not (k in _LATER and v == _DEFAULTS[k])
            },
        ]
        for pid, text, r in points
    ]
    key = [model, dimensions, SCHEMA_VERSION, tokenizer_version, written]
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Explanation:
    """How one result was found (kb.search.explain): its place and score in each ranking."""

    semantic_rank: int | None  # 1 = first; None: not in that search's best MAX_K
    semantic_score: float | None  # cosine similarity
    keyword_rank: int | None
    keyword_score: float | None  # BM25
    fused_rank: int  # place in the first stage's order (hybrid, or fused by rank)
    first_score: float  # the first stage's score
    rerank_rank: int | None = None  # place by the reranker's score alone (None: not reranked)
    rerank_score: float | None = None
    rerank_weight: float | None = None  # RERANK_WEIGHT: 1 = the reranker's order alone
    blended: float | None = None  # weight/(60+rerank_rank) + (1-weight)/(60+fused_rank)
    found_by: list[str] = field(default_factory=list)  # "query" and the alternates finding it
    filters: dict[str, Any] = field(default_factory=dict)  # the filters applied, as given
    collection: str = ""  # the Qdrant collection it came from
    indexed_at: str | None = None  # when its text was indexed (UTC, ISO)
    # stored by its words only so far: no semantic place until its meaning is embedded
    unembedded: bool = False
    # why hybrid fusion weighed the cosine down (a query in a language the embedding model does
    # not cover, kb.search.query.trust); None: it counted in full
    semantic_down: str | None = None


# An indexed item as an MCP resource (RFC 6570; notes_server.resources reads it): its source
# percent-encoded with its slashes kept, and optionally a passage, `?lines=FIRST-LAST`.
NOTE_URI = "notes:///{+source}{?lines}"


def note_uri(source: str, first: int | None = None, last: int | None = None) -> str:
    """The URI of `source` (lines `first`-`last` with both): `NOTE_URI` expanded. Every
    character but unreserved ones and `/` is encoded (spaces, non-ASCII, `?`, `#`, `%`, `+`),
    so the template's match gives the source back exactly."""
    uri = NOTE_URI.split("{", 1)[0] + quote(source, safe="/")
    return f"{uri}?lines={first}-{last}" if first is not None and last is not None else uri


@dataclass(frozen=True)
class Hit:
    """One search result: a stored chunk and its score. Fields a point lacks (written by an
    older version) are empty/None.

    `score` ranks results within one search: cosine similarity in semantic mode (-1..1), BM25
    in keyword mode (0 and up), cosine plus a keyword bonus of 0..1 in hybrid mode (0..2 for a
    lookup query: kb.store.query.fusion).
    """

    text: str
    source: str | None
    score: float
    tags: list[str] = field(default_factory=list)
    topic: str | None = None
    document_date: str | None = None
    date_ingested: str | None = None
    chunk_index: int | None = None
    line_start: int | None = None
    line_end: int | None = None
    char_start: int | None = None
    char_end: int | None = None
    title: str | None = None
    heading_path: list[str] = field(default_factory=list)
    hidden_chars_removed: int = 0  # invisible characters taken out of the strings above
    kind: str = NOTE  # "note", "video" or "web"; the video fields below are None for a note
    channel: str | None = None
    url: str | None = None
    duration_s: int | None = None
    view_count: int | None = None
    uploaded: str | None = None
    categories: list[str] = field(default_factory=list)
    language: str | None = None
    thumbnail: str | None = None
    rerank_score: float | None = (
        None  # the reranker's relevance (0..1) when it ran (kb.search.rerank)
    )
    locator: str = ""  # "p. 2", "row 17", "L 12-40", a heading path (kb.content.formats)
    domain: str = "prose"  # prose or code
    site: str | None = None  # a web page's (kind "web")
    author: str | None = None
    fetched_at: str | None = None
    bookmark_folders: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    links_out: int = 0  # indexed notes it links to
    links_in: int | None = None  # notes linking to it (counted by kb.search.search; None: not)
    # made by a search (kb.search), not stored:
    stale: bool | None = None  # the file changed since its text was indexed (None: unknown)
    confidence: float | None = None  # calibrated chance that it is relevant (kb.search.confidence)
    explain: Explanation | None = None  # with `explain`: how it was found
    # made from the fields above (also by dataclasses.replace, which budget's merges use):
    uri: str = field(init=False, default="")

    def __post_init__(self) -> None:
        # a file's lines are read_note's; a video's or page's stored text has its own
        lines = (self.line_start, self.line_end) if self.kind == NOTE else (None, None)
        object.__setattr__(self, "uri", note_uri(self.source, *lines) if self.source else "")

    @classmethod
    def from_payload(cls, score: float, payload: dict[str, Any]) -> Hit:
        def opt(key: str, kind: type) -> Any:
            value = payload.get(key)
            return value if isinstance(value, kind) and not isinstance(value, bool) else None

        def strings(key: str) -> list[str]:
            value = payload.get(key)
            return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

        removed = 0

        def shown(value: Any) -> Any:  # returned text never carries hidden characters
            nonlocal removed
            if not isinstance(value, str):
                return value
            value, count = strip_invisible(value)
            removed += count
            return value

        channel = shown(opt(CHANNEL, str))
        return cls(
            text=shown(payload.get("text") if isinstance(payload.get("text"), str) else ""),
            source=opt(SOURCE, str),
            score=float(score),
            tags=leaf_tags(strings(TAGS)),
            topic=shown(opt("topic", str)),
            document_date=opt(DOCUMENT_DATE, str),
            date_ingested=opt(DATE_INGESTED, str),
            chunk_index=opt(CHUNK_INDEX, int),
            line_start=opt("line_start", int),
            line_end=opt("line_end", int),
            char_start=opt("char_start", int),
            char_end=opt("char_end", int),
            title=shown(opt("title", str)),
            heading_path=[shown(h) for h in strings("heading_path")],
            locator=shown(opt("locator", str) or ""),
            domain=opt("domain", str) or "prose",
            kind=opt(KIND, str) or NOTE,
            channel=channel,
            url=at_moment(opt("url", str), strings("heading_path"), opt("locator", str) or ""),
            duration_s=opt(DURATION_S, int),
            view_count=opt(VIEW_COUNT, int),
            uploaded=opt(UPLOADED, str),
            categories=strings(CATEGORIES),
            language=opt(LANGUAGE, str),
            thumbnail=opt("thumbnail", str),
            site=shown(opt(SITE, str)),
            author=shown(opt("author", str)),
            fetched_at=opt("fetched_at", str),
            bookmark_folders=[shown(f) for f in strings("bookmark_folders")],
            aliases=[shown(a) for a in strings(ALIASES)],
            links_out=len(strings(LINKS)),
            hidden_chars_removed=removed,  # last: after every shown() above
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


HIT_FIELDS = frozenset(f.name for f in fields(Hit))
RESULT_ONLY_FIELDS = frozenset(
    {
        "score",
        "hidden_chars_removed",
        "rerank_score",
        "stale",
        "confidence",
        "explain",
        "links_out",
        "links_in",
        "uri",
    }
)  # made by a search (or counted from the payload), not stored
assert HIT_FIELDS - RESULT_ONLY_FIELDS <= PAYLOAD_FIELDS
