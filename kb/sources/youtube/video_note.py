"""A saved YouTube video as a note (kb.sources.youtube.playlist): its description cleaned and
chunked like
a Markdown note, its caption passages (kb.sources.youtube.captions) after it, each a block located
by the time
it starts at; and the file that keeps every fetched video's details.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kb.content.formats.base import Block
from kb.content.notes import Note
from kb.core.schema import TRANSCRIPT, VIDEO
from kb.sources.youtube import captions
from kb.sources.youtube.api import Video
from kb.sources.youtube.captions import Stored

_URL = re.compile(r"(?:https?://|www\.)\S+")
_DASHES = "-\u2013\u2014"  # hyphen, en dash, em dash
_TIMESTAMP = re.compile(r"^\s*[(\[]?(?:\d{1,2}:)?\d{1,2}:\d{2}[)\]]?\s*[" + _DASHES + r":|]?\s*")
_SPONSOR = re.compile(
    r"\b(sponsor(?:ed)?|use (?:my )?code|promo code|discount code|affiliate|% off|#ad\b)", re.I
)
_HASHTAGS_ONLY = re.compile(r"^\s*(?:#\w+\s*)+$")


def clean_description(text: str) -> str:
    """A description as worth embedding: links, sponsor lines and hashtag-only lines dropped,
    chapter timestamps taken off their titles (kept), blank runs collapsed."""
    lines: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if _SPONSOR.search(line) or _HASHTAGS_ONLY.match(line):
            continue
        unlinked = _URL.sub("", line)
        if unlinked != line and len(unlinked.split()) < 4:
            continue  # a link with its label ("Twitter: https://..."): nothing to embed
        line = " ".join(_TIMESTAMP.sub("", unlinked).rstrip(" :|" + _DASHES).split())
        if line.strip() or (lines and lines[-1]):
            lines.append(line.strip())
    return "\n".join(lines).strip()


def video_note(
    source: str, path: Path, video: Video, stored: Stored | None = None, notice: str | None = None
) -> Note:
    """The video as a note: `# title`, its channel, then the cleaned description, then its
    captions' passages (`stored`), each a block located by its start time; the title and
    channel are each chunk's context (the topic line), the video fields its payload."""
    body = clean_description(video.description)
    text = f"# {video.title or video.id}\n\nChannel: {video.channel}\n\n{body}".rstrip() + "\n"
    tail = []
    for start_s, passage in captions.windows(stored.segments if stored else []):
        begin = len(text) + 1
        text += f"\n{passage}\n"
        tail.append(Block(begin, begin + len(passage), captions.clock(start_s), (TRANSCRIPT,)))
    record: dict[str, Any] = {
        "kind": VIDEO,
        "channel": video.channel or None,
        "url": video.url,
        "duration_s": video.duration_s,
        "view_count": video.view_count,
        "uploaded": video.uploaded,
        "categories": list(video.categories),
        "language": video.language,
        "thumbnail": video.thumbnail,
    }
    topic = f"YouTube video by {video.channel}" if video.channel else "YouTube video"
    return Note(path, source, text, 0, (), topic, None, record=record, tail=tuple(tail),
                notice=notice)  # fmt: skip


class Details:
    """Fetched video details by id, in STATE_DIR/youtube/videos.json (rewritten atomically)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raw = {}
        self.videos: dict[str, Video] = {}
        for key, value in (raw if isinstance(raw, dict) else {}).items():
            try:
                self.videos[key] = Video(**value)
            except TypeError:
                continue  # written by another version: fetched again

    def add(self, videos: Sequence[Video]) -> None:
        self.videos.update((v.id, v) for v in videos)
        part = self.path.with_suffix(".tmp")
        data = {k: v.to_dict() for k, v in sorted(self.videos.items())}
        part.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        os.replace(part, self.path)
