"""YouTube playlists as a source: the Data API, quota, captions.

The kind (`KIND`) is declared here, its modules imported when a run builds its sources: finding
the kinds (kb.sources.registry) loads no HTTP client.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from kb.core.errors import ConfigError
from kb.core.schema import CHANNEL, DURATION_S, VIDEO, VIEW_COUNT
from kb.core.schema import KIND as KIND_FIELD
from kb.core.settings import SOURCE, KindSettings, Settings
from kb.core.state import YOUTUBE_DIR_NAME, State
from kb.sources.base import Source
from kb.sources.kind import Kind, Payload, Shown


class YoutubeSettings(KindSettings):
    """The YouTube playlists' settings (docs/guide/youtube.md)."""

    YOUTUBE_PLAYLISTS: str = Field(
        "",
        description="Comma-separated YouTube playlist ids synced as sources (each video one "
        "item, results under youtube/<id>/); WL is Watch Later (read with yt-dlp and cookies).",
        json_schema_extra=SOURCE,
    )
    YOUTUBE_API_KEY: str = Field(
        "", description="YouTube Data API v3 key: video details and custom playlists."
    )
    YOUTUBE_API_URL: str = Field(
        "https://www.googleapis.com/youtube/v3", description="Base URL of the YouTube Data API."
    )
    YOUTUBE_COOKIES_FILE: str = Field(
        "",
        description="Netscape cookies.txt of a signed-in YouTube session: only Watch Later (WL) "
        "needs it (or YOUTUBE_COOKIES_BROWSER).",
    )
    YOUTUBE_COOKIES_BROWSER: str = Field(
        "",
        description="Browser yt-dlp reads YouTube cookies from for Watch Later (e.g. firefox, "
        "chrome), instead of YOUTUBE_COOKIES_FILE.",
    )
    YOUTUBE_DAILY_UNITS: int = Field(
        9000,
        ge=1,
        description="Data API units a day's syncs may spend (the API's default quota is "
        "10,000 a Pacific-time day); the rest waits for the next day's run.",
    )
    YOUTUBE_CAPTIONS: bool = Field(
        False,
        description="Embed each video's captions (listed by yt-dlp, no Data API units) as "
        "passages whose link opens the video at that moment (&t=754s); off: they are removed.",
    )
    YOUTUBE_CAPTIONS_LANGUAGES: str = Field(
        "",
        description="Caption languages to prefer, comma-separated (e.g. de,en); then the "
        "video's own language, then English.",
    )
    YOUTUBE_REFRESH_DAYS: int = Field(
        7,
        ge=0,
        description="Days after which a video's view count is fetched again (videos.list, 1 "
        "unit per 50 videos; the payload is updated, nothing embedded); 0: never.",
    )


class Youtube(Kind):
    """The YOUTUBE_PLAYLISTS playlists: each video an item of kind `video`, read back from what
    the index stored (the video has no file of the user's)."""

    name = "youtube"
    order = 2
    remote = True  # the Data API's quota: never spent by a watcher's batch
    prefix = "youtube"
    fields = (CHANNEL, DURATION_S, VIEW_COUNT)
    unseen = "no video of the YOUTUBE_PLAYLISTS playlists is named so (youtube/<playlist>/<id>)"
    setting = "YOUTUBE_PLAYLISTS"
    settings_model = YoutubeSettings

    def build(self, settings: Settings, state: State) -> list[Source]:
        from kb.sources.youtube.playlist import playlists

        return list(playlists(settings, state))

    def owns(self, payload: Payload) -> bool:
        return payload.get(KIND_FIELD) == VIDEO

    def shown(self, settings: Settings) -> list[Shown]:
        """Each playlist (its origin youtube/<id>), with what keeps it from syncing: no API
        key, Watch Later without cookies."""
        from kb.sources.youtube import watch_later
        from kb.sources.youtube.playlist import NO_KEY, parse

        own = settings.of(YoutubeSettings)
        rows = []
        for playlist in parse(own.YOUTUBE_PLAYLISTS):
            problem = None if own.YOUTUBE_API_KEY else NO_KEY
            if playlist == watch_later.WATCH_LATER:
                try:
                    watch_later.options(own.YOUTUBE_COOKIES_FILE, own.YOUTUBE_COOKIES_BROWSER)
                except ConfigError as exc:
                    problem = str(exc)
            link = f"https://www.youtube.com/playlist?list={playlist}"
            logged = str(settings.STATE_DIR / YOUTUBE_DIR_NAME)  # every playlist's
            rows.append(Shown(f"{self.prefix}/{playlist}", self.setting, link, logged, problem))
        return rows

    def close(self, sources: Sequence[Source]) -> None:
        from kb.sources.youtube.playlist import PlaylistSource, close

        close([s for s in sources if isinstance(s, PlaylistSource)])


KIND = Youtube()
