"""A YouTube Data API v3 on 127.0.0.1 for the YouTube tests: real HTTP, replaying recorded
responses in the API's shapes (tests/youtube_data/: videos.list items, error bodies, a
`yt-dlp --flat-playlist -J` of Watch Later), with playlists a test sets and faults it queues.
The same server answers caption tracks (`/api/timedtext`, json3 and WebVTT bodies recorded in
tests/youtube_data/timedtext/), which the recorded `yt-dlp -J` info dicts of single videos
(video_info.json) point at once `video_info` has rewritten their host.

Pages are cut like the API's: `maxResults` entries per page and an opaque `nextPageToken`.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

DATA = Path(__file__).parent / "youtube_data"
KEY = "AIzaSyTestKeyForTheLocalReplayServer0"
RECORDED = json.loads((DATA / "videos.json").read_text(encoding="utf-8"))
ERRORS = json.loads((DATA / "errors.json").read_text(encoding="utf-8"))
WATCH_LATER_FLAT = json.loads((DATA / "watch_later_flat.json").read_text(encoding="utf-8"))
VIDEO_INFO = json.loads((DATA / "video_info.json").read_text(encoding="utf-8"))
TIMEDTEXT = "https://www.youtube.com/api/timedtext"


def filler(n: int) -> dict[str, Any]:
    """A videos.list item like the recorded ones, for long playlists."""
    item = copy.deepcopy(RECORDED[3])
    video_id = f"lecture{n:04d}"
    item["id"] = video_id
    item["snippet"].update(
        title=f"Lecture {n}: notes on a topic",
        description=f"Lecture number {n} of a long course.",
        publishedAt=f"2020-01-{1 + n % 28:02d}T10:00:00Z",
    )
    item["contentDetails"]["duration"] = f"PT{20 + n % 40}M"
    item["statistics"]["viewCount"] = str(1000 + n)
    return item


@dataclass
class Replay:
    """What the server holds and was asked."""

    videos: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> videos.list item
    playlists: dict[str, list[str]] = field(default_factory=dict)  # id -> video ids, in order
    faults: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # next answers
    caption_faults: list[int] = field(default_factory=list)  # next caption tracks' statuses
    requests: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)
    url: str = ""

    def calls(self, name: str) -> int:
        return sum(1 for call, _ in self.requests if call == name)

    def video_info(self, video_id: str) -> dict[str, Any]:
        """What kb.sources.youtube.captions.video_info returns for a recorded video, minus the
        network: yt-dlp
        processes the recorded `yt-dlp -J` result, its caption tracks pointed at this server."""
        from yt_dlp import YoutubeDL

        root = self.url.removesuffix("/youtube/v3")
        raw = json.dumps(VIDEO_INFO[video_id]).replace(TIMEDTEXT, f"{root}/api/timedtext")
        with YoutubeDL({"quiet": True, "skip_download": True}) as ydl:
            return ydl.sanitize_info(ydl.process_ie_result(json.loads(raw), download=False))

    def add(self, *items: dict[str, Any]) -> list[str]:
        for item in items:
            self.videos[item["id"]] = item
        return [item["id"] for item in items]


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"CAE:{offset}".encode()).decode().rstrip("=")


def _offset(token: str) -> int:
    return int(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode().split(":")[1])


def _placeholder(video_id: str, title: str) -> dict[str, Any]:
    """A playlistItems.list item for a deleted or private video, as the API shows it."""
    return {
        "kind": "youtube#playlistItem",
        "id": f"UEx{video_id}",
        "snippet": {"title": title, "description": f"This video is {title.split()[0].lower()}.",
                    "thumbnails": {}, "resourceId": {"kind": "youtube#video", "videoId": video_id}},
        "status": {"privacyStatus": "private" if title == "Private video" else "public"},
    }  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    replay: Replay

    def log_message(self, *args: Any) -> None:
        pass

    def _send(
        self, status: int, body: dict[str, Any] | bytes, kind: str = "application/json"
    ) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        call = url.path.rstrip("/").rsplit("/", 1)[-1]
        query = parse_qs(url.query)
        self.replay.requests.append((call, query))
        if call == "timedtext":
            self._timedtext(query)
            return
        if self.replay.faults:
            self._send(*self.replay.faults.pop(0))
            return
        if query.get("key") != [KEY]:
            self._send(400, ERRORS["keyInvalid"])
            return
        size = int(query.get("maxResults", ["5"])[0])
        if call == "videos":
            ids = query["id"][0].split(",")
            items = [self.replay.videos[i] for i in ids if i in self.replay.videos]
            self._send(200, {"kind": "youtube#videoListResponse", "items": items,
                             "pageInfo": {"totalResults": len(items),
                                          "resultsPerPage": len(items)}})  # fmt: skip
        elif call == "playlistItems":
            playlist = query["playlistId"][0]
            ids = self.replay.playlists.get(playlist)
            if ids is None:
                missing = {"code": 404, "message": "playlist not found",
                           "errors": [{"reason": "playlistNotFound"}]}  # fmt: skip
                self._send(404, {"error": missing})
                return
            start = _offset(query["pageToken"][0]) if "pageToken" in query else 0
            items = []
            for pos, vid in enumerate(ids[start : start + size], start):
                if vid in self.replay.videos:
                    snippet = self.replay.videos[vid]["snippet"]
                    items.append({
                        "kind": "youtube#playlistItem", "id": f"UEx{pos}",
                        "snippet": {"title": snippet["title"], "position": pos,
                                    "channelTitle": snippet["channelTitle"],
                                    "resourceId": {"kind": "youtube#video", "videoId": vid}},
                        "status": {"privacyStatus": "public"},
                    })  # fmt: skip
                else:  # not in the catalogue: gone since it was saved
                    items.append(_placeholder(vid, "Deleted video" if "del" in vid
                                              else "Private video"))  # fmt: skip
            body: dict[str, Any] = {"kind": "youtube#playlistItemListResponse", "items": items,
                                    "pageInfo": {"totalResults": len(ids),
                                                 "resultsPerPage": size}}  # fmt: skip
            if start + size < len(ids):
                body["nextPageToken"] = _token(start + size)
            self._send(200, body)
        else:
            self._send(404, {"error": {"code": 404, "message": f"no {call}"}})

    def _timedtext(self, query: dict[str, list[str]]) -> None:
        """A caption track as YouTube serves it (the body recorded for its v, lang and fmt)."""
        if self.replay.caption_faults:
            self._send(self.replay.caption_faults.pop(0), b"", "text/html")
            return
        video, lang, fmt = (query.get(k, [""])[0] for k in ("v", "lang", "fmt"))
        path = DATA / "timedtext" / f"{video}.{lang}.{fmt}"
        if "tlang" in query or not path.is_file():
            self._send(404, b"", "text/html")
            return
        kind = "application/json" if fmt == "json3" else "text/vtt"
        self._send(200, path.read_bytes(), kind)


@pytest.fixture
def youtube_api() -> Iterator[Replay]:
    """A replaying Data API on a random port; `replay.url` is its YOUTUBE_API_URL."""
    with replaying() as replay:
        yield replay


@contextmanager
def replaying() -> Iterator[Replay]:
    """The replaying Data API, holding the recorded videos, for one `with` block."""
    replay = Replay()
    replay.add(*RECORDED)
    handler = type("Handler", (_Handler,), {"replay": replay})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    replay.url = f"http://127.0.0.1:{server.server_address[1]}/youtube/v3"
    try:
        yield replay
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class Clock:
    """An injectable clock for the quota ledger."""

    def __init__(self, when: str) -> None:
        self.now = datetime.fromisoformat(when).astimezone(UTC)

    def __call__(self) -> datetime:
        return self.now
