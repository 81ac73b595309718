"""A video's captions as timed passages (YOUTUBE_CAPTIONS): which track, fetched and parsed.

yt-dlp's full extraction of one video (`video_info`, the network seam) lists its caption
tracks: `subtitles` (uploaded by the channel) and `automatic_captions` (speech recognition,
plus machine translations of it into every language, the original marked `<lang>-orig`).
`pick` prefers an uploaded track to an automatic one and, of automatic ones, the original to a
translation; then YOUTUBE_CAPTIONS_LANGUAGES, the video's language, English, the first. The
track's json3 (else WebVTT) body is fetched with plain httpx (a timedtext URL: no Data API
quota) and parsed into (start ms, text) segments; `windows` packs those into passages on
segment boundaries, each with the time it starts at.

What was fetched is kept per video in STATE_DIR/youtube/captions/<id>.json (`Stored`), also
"this video has none", so each video's captions are fetched once; a failed fetch keeps
nothing and is tried again by the next run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from kb.core.errors import ConfigError, KbError

FORMATS = ("json3", "vtt")  # the track bodies read, best first
PASSAGE_MIN_CHARS = 400  # a passage is closed on the first segment boundary past this ...
PASSAGE_MAX_CHARS = 1200  # ... and never grows past this (kb.content.chunking.CHUNK_CHARS is 1500)
ORIGINAL = "-orig"  # yt-dlp's mark on the automatic track in the spoken language
_TAG = re.compile(r"<[^>]*>")  # WebVTT inline tags: <00:00:01.200><c> word</c>


class CaptionError(KbError):
    """A video's captions could not be listed or fetched (tried again next run)."""


@dataclass(frozen=True)
class Track:
    language: str  # the track's key: "en", "de", "en-orig", "pt-BR"
    automatic: bool  # speech recognition, not uploaded by the channel
    ext: str  # json3 or vtt
    url: str


@dataclass
class Stored:
    """A video's captions as kept in STATE_DIR: its segments, or none (`segments` empty)."""

    language: str | None = None  # None: the video has no caption track we read
    automatic: bool = False
    segments: list[tuple[int, str]] = field(default_factory=list)  # (start ms, text)


def clock(seconds: int) -> str:
    """754 -> "12:34", 3723 -> "1:02:03" (a passage's locator)."""
    hours, rest = divmod(max(0, seconds), 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _primary(language: str) -> str:
    return language.removesuffix(ORIGINAL).split("-")[0].lower()


def pick(
    info: dict[str, Any], preferred: Sequence[str] = (), language: str | None = None
) -> Track | None:
    """The track to read from a yt-dlp info dict, or None when it lists none we can read."""
    for automatic, key in ((False, "subtitles"), (True, "automatic_captions")):
        tracks = {
            lang: formats
            for lang, formats in (info.get(key) or {}).items()
            if lang != "live_chat" and isinstance(formats, list)
        }
        if automatic and any(lang.endswith(ORIGINAL) for lang in tracks):
            tracks = {k: v for k, v in tracks.items() if k.endswith(ORIGINAL)}  # no translations
        order = [*preferred, language or info.get("language") or "", "en"]
        ranked = sorted(
            tracks,
            key=lambda lang: next(
                (i for i, want in enumerate(order) if want and _primary(lang) == _primary(want)),
                len(order),
            ),
        )  # stable: tracks no preference names keep yt-dlp's order ("the first")
        for lang in ranked:
            by_ext = {f.get("ext"): f for f in tracks[lang] if isinstance(f, dict) and f.get("url")}
            for ext in FORMATS:
                if ext in by_ext:
                    return Track(lang, automatic, ext, str(by_ext[ext]["url"]))
    return None


def parse_json3(body: bytes) -> list[tuple[int, str]]:
    """YouTube's json3 timedtext: `events[].tStartMs` and `segs[].utf8`."""
    try:
        events = json.loads(body).get("events") or []
    except (ValueError, AttributeError) as exc:
        raise CaptionError(f"not a json3 caption track ({exc})") from None
    found = []
    for event in events:
        if not isinstance(event, dict) or not event.get("segs"):
            continue
        segs = [s for s in event["segs"] if isinstance(s, dict)]
        text = " ".join("".join(str(s.get("utf8") or "") for s in segs).split())
        if text:
            found.append((int(event.get("tStartMs") or 0), text))
    return found


def parse_vtt(body: bytes) -> list[tuple[int, str]]:
    """A WebVTT track, read by yt-dlp's own parser; a line repeated from the cue before (the
    rolling display of automatic captions) is kept once."""
    from yt_dlp import webvtt

    found: list[tuple[int, str]] = []
    seen: list[str] = []
    try:
        for block in webvtt.parse_fragment(body):
            if not isinstance(block, webvtt.CueBlock):
                continue
            lines = [" ".join(_TAG.sub("", line).split()) for line in block.text.splitlines()]
            new = [line for line in lines if line and line not in seen]
            seen = [line for line in lines if line]
            if new:
                found.append((int(block.start // 90), " ".join(new)))  # 90 kHz ticks -> ms
    except (webvtt.ParseError, UnicodeDecodeError) as exc:  # its message quotes the text
        raise CaptionError(f"not a WebVTT caption track ({type(exc).__name__})") from None
    return found


def windows(
    segments: Sequence[tuple[int, str]],
    shortest: int = PASSAGE_MIN_CHARS,
    longest: int = PASSAGE_MAX_CHARS,
) -> list[tuple[int, str]]:
    """Segments packed into passages of about shortest..longest on segment boundaries:
    (start in whole seconds, text), the start being that of the passage's first segment."""
    out: list[tuple[int, str]] = []
    parts: list[str] = []
    start, size = 0, 0
    for at, text in segments:
        if parts and (size >= shortest or size + 1 + len(text) > longest):
            out.append((start // 1000, " ".join(parts)))
            parts, size = [], 0
        if not parts:
            start = at
        parts.append(text)
        size += len(text) + (1 if size else 0)
    if parts:
        out.append((start // 1000, " ".join(parts)))
    return out


class Captions:
    """Fetched captions by video id in `folder` (one file each, rewritten atomically)."""

    def __init__(self, folder: Path, http: httpx.Client, preferred: Sequence[str] = ()) -> None:
        self.folder = folder
        self.http = http
        self.preferred = [p for p in preferred if p]

    def _path(self, video_id: str) -> Path:
        return self.folder / f"{video_id}.json"

    def get(self, video_id: str) -> Stored | None:
        """What is kept for the video; None when nothing is (never fetched, or unreadable)."""
        try:
            raw = json.loads(self._path(video_id).read_text(encoding="utf-8"))
            return Stored(raw["language"], bool(raw["automatic"]),
                          [(int(t), str(s)) for t, s in raw["segments"]])  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def fetch(self, video_id: str, info: dict[str, Any], language: str | None) -> Stored:
        """Read the best track that `info` (yt-dlp's extraction) lists, and keep it (or that
        there is none); CaptionError when the track cannot be fetched or read."""
        track = pick(info, self.preferred, language)
        stored = Stored()
        if track is not None:
            headers = info.get("http_headers")  # what yt-dlp would send (its User-Agent ...)
            try:
                response = self.http.get(track.url, headers=headers or None)
            except httpx.HTTPError as exc:
                raise CaptionError(f"{type(exc).__name__} fetching the captions") from None
            if response.status_code != 200:
                raise CaptionError(f"HTTP {response.status_code} fetching the captions")
            parse = parse_json3 if track.ext == "json3" else parse_vtt
            stored = Stored(track.language.removesuffix(ORIGINAL), track.automatic,
                            parse(response.content))  # fmt: skip
        self.folder.mkdir(parents=True, exist_ok=True)
        part = self._path(video_id).with_suffix(".tmp")
        part.write_text(json.dumps(asdict(stored), ensure_ascii=False), encoding="utf-8")
        os.replace(part, self._path(video_id))
        return stored


def options(cookies_file: str = "", cookies_browser: str = "") -> dict[str, Any]:
    """yt-dlp's options for a full extraction of one video (what lists its captions): the deno
    of the `youtube` extra as its JavaScript runtime; the user's cookies when set (optional)."""
    opts: dict[str, Any] = {"quiet": True, "no_warnings": True, "skip_download": True,
                            "ignore_no_formats_error": True}  # fmt: skip
    try:
        from deno import find_deno_bin
    except ImportError:
        pass  # yt-dlp looks for a deno on PATH itself
    else:
        opts["js_runtimes"] = {"deno": {"path": find_deno_bin()}}
    if cookies_file:
        opts["cookiefile"] = cookies_file
    elif cookies_browser:
        opts["cookiesfrombrowser"] = (cookies_browser,)
    return opts


def video_info(video_id: str, opts: dict[str, Any]) -> dict[str, Any]:
    """yt-dlp's full extraction of one video (`yt-dlp -J URL`): the network seam."""
    try:
        from yt_dlp import YoutubeDL
        from yt_dlp.utils import YoutubeDLError
    except ImportError:
        raise ConfigError(
            "YOUTUBE_CAPTIONS=true lists captions with yt-dlp: install the extra with "
            "`uv sync --extra youtube`"
        ) from None
    with YoutubeDL(opts) as ydl:
        try:
            url = f"https://www.youtube.com/watch?v={video_id}"
            return ydl.sanitize_info(ydl.extract_info(url, download=False))
        except YoutubeDLError as exc:
            raise CaptionError(f"yt-dlp could not read the video ({exc})") from None
        except Exception as exc:  # yt-dlp changes often: its failure is this video's, not the run's
            raise CaptionError(f"yt-dlp failed ({type(exc).__name__}: {exc})") from None
