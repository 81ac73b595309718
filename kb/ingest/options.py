"""What a run is asked to do (IngestOptions: the user's choices for this run) and what it is
configured with (IngestConfig: the settings it reads, as plain values).

IngestOptions is what `ingest.py` builds from its arguments, what the dashboard's Sync and the
watcher pass, and what the hand-off to the MCP server carries (kb.app.handoff): `to_json` and
`from_json` are its one wire form, so every option crosses it
(tests/unit/ingest/test_ingest_options.py fails for an option that does not). `stop` and
`progress` belong to the process that runs the ingest and never cross.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from pathlib import Path

from kb.ingest.progress import Progress

# the wire form: JSON scalars and lists of strings
Json = bool | str | list[str] | None
LOCAL = "local"  # field metadata: the option stays in this process (not in the wire form)


@dataclass(frozen=True)
class IngestOptions:
    # False: nothing rebuilt; True: every collection; a collection's name: that one only
    rebuild: bool | str = False
    allow_deletes: bool = False  # a complete source may lose more than NOTE_FOLDERS_MAX_DELETE
    youtube_only: bool = False  # only the YOUTUBE_PLAYLISTS playlists (no inbox, no folder)
    # the origins to sync ("inbox", NOTE_FOLDERS names), no playlist; None: every source
    only: frozenset[str] | None = None
    stop: threading.Event | None = field(default=None, metadata={LOCAL: True})  # after a group
    progress: Progress | None = field(default=None, metadata={LOCAL: True})

    def rebuilds(self, collection: str) -> bool:
        """Whether the collection named `collection` is rebuilt."""
        return self.rebuild is True or self.rebuild == collection

    def to_json(self) -> dict[str, Json]:
        """The options that cross to another process (all but `stop` and `progress`)."""
        return {
            "rebuild": self.rebuild,
            "allow_deletes": self.allow_deletes,
            "youtube_only": self.youtube_only,
            "only": None if self.only is None else sorted(self.only),
        }

    @classmethod
    def from_json(cls, data: object) -> IngestOptions:
        """The options `to_json` wrote; ValueError naming the field for anything else (an
        option this version does not know included: it is refused, never dropped)."""
        if not isinstance(data, dict):
            raise ValueError("the ingest options must be a JSON object")
        unknown = sorted(set(data) - set(carried()))
        if unknown:
            raise ValueError(f"unknown ingest options: {', '.join(map(str, unknown))}")
        rebuild = data.get("rebuild", False)
        if not isinstance(rebuild, bool | str) or rebuild == "":
            raise ValueError(f"rebuild must be true, false or a collection's name, not {rebuild!r}")
        only = data.get("only")
        if only is not None and (
            not isinstance(only, list) or not all(isinstance(o, str) for o in only)
        ):
            raise ValueError(f"only must be null or a list of origins, not {only!r}")
        return cls(
            rebuild=rebuild,
            allow_deletes=_flag(data, "allow_deletes"),
            youtube_only=_flag(data, "youtube_only"),
            only=None if only is None else frozenset(only),
        )


DEFAULTS = IngestOptions()  # a plain run: nothing rebuilt, every source, guarded


def carried() -> list[str]:
    """The names of the options in the wire form: every field not marked LOCAL."""
    return [f.name for f in fields(IngestOptions) if not f.metadata.get(LOCAL)]


def _flag(data: dict[str, object], name: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, not {value!r}")
    return value


@dataclass(frozen=True)
class IngestConfig:
    """The settings a run reads, as plain values (kb.app.ingest.ingest_config builds it)."""

    max_bytes: int  # NOTE_MAX_BYTES: a bigger file fails by name
    group_chunks: int  # EMBED_BATCH_SIZE: notes embedded and written together (one request)
    cache: bool  # EMBED_CACHE: vectors reused by content hash (STATE_DIR)
    max_delete: float  # NOTE_FOLDERS_MAX_DELETE: the share a complete source may lose
    private_tags: frozenset[str]  # PRIVATE_TAGS, normalised
    old_cache_dir: Path | None = None  # NOTES_DIR: where versions before STATE_DIR kept the cache
