"""Watch Later's video ids, through yt-dlp with the user's cookies: the Data API cannot read
Watch Later (it answers with an empty list).

`flat_playlist` is the network call (yt-dlp's flat extraction: the playlist page only, no
video page, so no JavaScript runtime is needed); `entries` consumes its result. yt-dlp is an
optional extra (`uv sync --extra youtube`): only a user who syncs Watch Later needs it.
"""

from __future__ import annotations

from typing import Any

from kb.core.errors import ConfigError, KbError
from kb.sources.youtube.api import Entry, unavailable

WATCH_LATER = "WL"
WATCH_LATER_URL = "https://www.youtube.com/playlist?list=WL"


def options(cookies_file: str = "", cookies_browser: str = "") -> dict[str, Any]:
    """yt-dlp's options for a flat listing with the user's cookies (ConfigError without any)."""
    opts: dict[str, Any] = {"extract_flat": "in_playlist", "quiet": True, "no_warnings": True,
                            "skip_download": True}  # fmt: skip
    if cookies_file:
        opts["cookiefile"] = cookies_file
    elif cookies_browser:
        opts["cookiesfrombrowser"] = (cookies_browser,)
    else:
        raise ConfigError(
            "YOUTUBE_PLAYLISTS has WL (Watch Later), which needs the cookies of a signed-in "
            "browser: set YOUTUBE_COOKIES_FILE (a cookies.txt) or YOUTUBE_COOKIES_BROWSER"
        )
    return opts


def youtube_dl(opts: dict[str, Any]) -> Any:
    try:
        from yt_dlp import YoutubeDL
    except ImportError:
        raise ConfigError(
            "YOUTUBE_PLAYLISTS has WL (Watch Later), which is read with yt-dlp: install the "
            "extra with `uv sync --extra youtube` (or run `uv run --extra youtube ingest.py`)"
        ) from None
    return YoutubeDL(opts)


class WatchLaterError(KbError):
    """yt-dlp could not list Watch Later (cookies expired, YouTube refused, no network)."""


def flat_playlist(url: str, opts: dict[str, Any]) -> dict[str, Any]:
    """The playlist as yt-dlp's flat extraction returns it (`yt-dlp --flat-playlist -J`);
    WatchLaterError when yt-dlp fails."""
    with youtube_dl(opts) as ydl:
        from yt_dlp.utils import YoutubeDLError

        try:
            return ydl.sanitize_info(ydl.extract_info(url, download=False))
        except YoutubeDLError as exc:
            raise WatchLaterError(
                f"yt-dlp could not list Watch Later ({exc}); are the cookies of "
                "YOUTUBE_COOKIES_FILE / YOUTUBE_COOKIES_BROWSER still signed in?"
            ) from None


def entries(info: dict[str, Any]) -> list[Entry]:
    """The playlist's videos from a flat extraction's result, in order; deleted and private
    videos ("[Deleted video]", "[Private video]") marked so."""
    found = []
    for entry in info.get("entries") or []:
        if not isinstance(entry, dict) or not entry.get("id"):
            continue
        title = str(entry.get("title") or "")
        found.append(Entry(str(entry["id"]), title, unavailable(title)))
    return found
