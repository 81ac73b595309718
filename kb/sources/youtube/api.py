"""The YouTube Data API v3, as the YouTube sources use it: a playlist's video ids
(`playlistItems.list`, one unit per page of 50) and videos' details (`videos.list`, one unit per
call of up to 50 ids). Plain httpx against YOUTUBE_API_URL (a test points it at a local server).

Every request is counted in the quota ledger (kb.sources.youtube.quota) before it is sent. 5xx
answers, 429 and
403 rate limits are retried a bounded number of times with exponential backoff, then raise
YoutubeError naming the call; 403 quotaExceeded is not retried (the API's quota only resets at
midnight Pacific): the ledger marks the day spent and QuotaReached says the rest waits.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import unquote

import httpx

from kb.core.errors import KbError
from kb.sources.youtube.quota import Ledger, QuotaReached

PAGE = 50  # the most ids or playlist entries one call returns
RETRIED_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "backendError"})
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")
WATCH_URL = "https://www.youtube.com/watch?v="


class YoutubeError(KbError):
    """A Data API call failed for good (after its retries), or the key was refused."""


def iso_duration(value: str) -> int | None:
    """`PT1H2M3S` -> 3723 seconds (`P1DT2H` has days); None for what is no such duration."""
    match = _DURATION.fullmatch(value or "")
    if not match or not any(match.groups()):
        return None if value != "P0D" else 0
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int(days * 86400 + hours * 3600 + minutes * 60 + seconds)


@dataclass(frozen=True)
class Video:
    """One video's details, as stored in each of its points' payload."""

    id: str
    title: str
    channel: str
    description: str
    url: str
    duration_s: int | None = None
    view_count: int | None = None
    uploaded: str | None = None  # ISO 8601, UTC
    categories: list[str] = field(default_factory=list)
    language: str | None = None  # primary language subtag, lowercase: "en", "ja"
    thumbnail: str | None = None
    fetched: str | None = (
        None  # UTC, ISO 8601: when view_count was read (kb.sources.youtube.playlist)
    )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_api(cls, item: dict[str, Any]) -> Video:
        """A `videos.list` item (parts snippet, contentDetails, statistics, topicDetails)."""
        snippet = item.get("snippet") or {}
        details = item.get("contentDetails") or {}
        stats = item.get("statistics") or {}
        topics = (item.get("topicDetails") or {}).get("topicCategories") or []
        thumbs = snippet.get("thumbnails") or {}
        sizes = ("maxres", "standard", "high", "medium", "default")
        best: dict[str, Any] = next(
            (thumbs[k] for k in sizes if isinstance(thumbs.get(k), dict)), {}
        )
        language = snippet.get("defaultAudioLanguage") or snippet.get("defaultLanguage")
        return cls(
            id=str(item["id"]),
            title=str(snippet.get("title") or ""),
            channel=str(snippet.get("channelTitle") or ""),
            description=str(snippet.get("description") or ""),
            url=WATCH_URL + str(item["id"]),
            duration_s=iso_duration(str(details.get("duration") or "")),
            view_count=views(stats),
            uploaded=snippet.get("publishedAt") or None,
            # topic categories are Wikipedia URLs: .../wiki/Role-playing_video_game
            categories=[unquote(t.rsplit("/", 1)[-1]).replace("_", " ") for t in topics],
            language=str(language).split("-")[0].lower() if language else None,
            thumbnail=best.get("url"),
        )


def views(statistics: dict[str, Any]) -> int | None:
    """`statistics.viewCount` (a string of digits; absent when the owner hides it)."""
    value = str(statistics.get("viewCount") or "")
    return int(value) if value.isdigit() else None


@dataclass(frozen=True)
class Entry:
    """One entry of a playlist: a video id and the title the playlist shows for it."""

    id: str
    title: str
    private: bool = False  # "Private video" / "Deleted video": no details to fetch


def unavailable(title: str, privacy: str | None = None) -> bool:
    """The placeholders a playlist shows for a video that is gone or private."""
    return privacy == "private" or title.strip("[] ") in ("Deleted video", "Private video")


class YoutubeApi:
    """The two calls, with the key, quota ledger and retry policy."""

    def __init__(
        self,
        base_url: str,
        key: str,
        ledger: Ledger,
        *,
        retries: int = 4,
        backoff_s: float = 1.0,
        timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.http = httpx.Client(base_url=base_url.rstrip("/") + "/", timeout=timeout_s,
                                 transport=transport)  # fmt: skip
        self.key = key
        self.ledger = ledger
        self.retries = retries
        self.backoff_s = backoff_s
        self.sleep = sleep
        self.calls = 0  # requests sent (each one unit)

    def close(self) -> None:
        self.http.close()

    def playlist(self, playlist_id: str) -> Iterator[list[Entry]]:
        """The playlist's entries, one page (one unit) at a time."""
        token = ""
        while True:
            params = {"part": "snippet,status", "playlistId": playlist_id, "maxResults": PAGE}
            if token:
                params["pageToken"] = token
            body = self._get("playlistItems", params)
            page = []
            for item in body.get("items") or []:
                snippet = item.get("snippet") or {}
                video = (snippet.get("resourceId") or {}).get("videoId")
                if not video:
                    continue
                title = str(snippet.get("title") or "")
                privacy = (item.get("status") or {}).get("privacyStatus")
                page.append(Entry(str(video), title, unavailable(title, privacy)))
            yield page
            token = body.get("nextPageToken") or ""
            if not token:
                return

    def videos(self, ids: Sequence[str]) -> list[Video]:
        """Details of up to PAGE videos in one call (one unit); a deleted or private video is
        simply not among them."""
        if len(ids) > PAGE:
            raise ValueError(f"videos.list takes at most {PAGE} ids, got {len(ids)}")
        params = {"part": "snippet,contentDetails,statistics,topicDetails", "id": ",".join(ids),
                  "maxResults": PAGE}  # fmt: skip
        body = self._get("videos", params)
        return [Video.from_api(item) for item in body.get("items") or [] if item.get("id")]

    def statistics(self, ids: Sequence[str]) -> dict[str, int | None]:
        """View counts of up to PAGE videos (part statistics alone: one unit), by id."""
        if len(ids) > PAGE:
            raise ValueError(f"videos.list takes at most {PAGE} ids, got {len(ids)}")
        params = {"part": "statistics", "id": ",".join(ids), "maxResults": PAGE}
        body = self._get("videos", params)
        items = [item for item in body.get("items") or [] if item.get("id")]
        return {str(item["id"]): views(item.get("statistics") or {}) for item in items}

    def _get(self, call: str, params: dict[str, Any]) -> dict[str, Any]:
        name = f"YouTube Data API {call}.list"
        for attempt in range(self.retries + 1):
            self.ledger.spend(1)
            self.calls += 1
            try:
                response = self.http.get(call, params={**params, "key": self.key})
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__} at {self.http.base_url}"
            else:
                if response.status_code == 200:
                    return response.json()
                reason, message = _error(response)
                if reason == "quotaExceeded":
                    self.ledger.exhaust()
                    raise QuotaReached(
                        f"{name}: the API's daily quota is spent (403 quotaExceeded); the rest "
                        "waits for the next run after midnight Pacific"
                    )
                if reason in ("keyInvalid", "keyExpired") or response.status_code in (400, 401):
                    raise YoutubeError(f"{name}: YOUTUBE_API_KEY was refused ({reason}: {message})")
                problem = f"HTTP {response.status_code} {reason}: {message}"
                if not (
                    response.status_code >= 500
                    or response.status_code == 429
                    or reason in RETRIED_REASONS
                ):
                    raise YoutubeError(f"{name} failed: {problem}")
            if attempt < self.retries:
                self.sleep(min(30.0, self.backoff_s * 2**attempt))
        raise YoutubeError(f"{name} failed after {self.retries + 1} tries: {problem}")


def _error(response: httpx.Response) -> tuple[str, str]:
    """(reason, message) of the API's error body (`{"error": {"errors": [{"reason"}]}}`)."""
    try:
        error = response.json().get("error") or {}
    except ValueError:
        return "", response.text[:200]
    reasons = [e.get("reason") for e in error.get("errors") or [] if isinstance(e, dict)]
    reason = reasons[0] if reasons else error.get("status") or ""
    return str(reason), str(error.get("message"))[:200]


__all__ = ["PAGE", "Entry", "QuotaReached", "Video", "YoutubeApi", "YoutubeError", "iso_duration"]
