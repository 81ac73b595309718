"""YouTube playlists as a source: the Data API, quota, captions.

The kind (`KIND`) is declared here, its modules imported when a run builds its sources: finding
the kinds (kb.sources.registry) loads no HTTP client.
"""

from __future__ import annotations

from collections.abc import Sequence

from kb.core.errors import ConfigError
from kb.core.schema import CHANNEL, DURATION_S, VIDEO, VIEW_COUNT
from kb.core.schema import KIND as KIND_FIELD
from kb.core.settings import Settings
from kb.core.state import YOUTUBE_DIR_NAME, State
from kb.sources.base import Source
from kb.sources.kind import Kind, Payload, Shown


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

        rows = []
        for playlist in parse(settings.YOUTUBE_PLAYLISTS):
            problem = None if settings.YOUTUBE_API_KEY else NO_KEY
            if playlist == watch_later.WATCH_LATER:
                try:
                    watch_later.options(
                        settings.YOUTUBE_COOKIES_FILE, settings.YOUTUBE_COOKIES_BROWSER
                    )
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
