"""YouTube playlists as a source: the Data API, quota, captions.

The kind (`KIND`) is declared here, its modules imported when a run builds its sources: finding
the kinds (kb.sources.registry) loads no HTTP client.
"""

from __future__ import annotations

from collections.abc import Sequence

from kb.core.schema import CHANNEL, DURATION_S, VIDEO, VIEW_COUNT
from kb.core.schema import KIND as KIND_FIELD
from kb.core.settings import Settings
from kb.core.state import State
from kb.sources.base import Source
from kb.sources.kind import Kind, Payload


class Youtube(Kind):
    """The YOUTUBE_PLAYLISTS playlists: each video an item of kind `video`, read back from what
    the index stored (the video has no file of the user's)."""

    name = "youtube"
    order = 2
    remote = True  # the Data API's quota: never spent by a watcher's batch
    prefix = "youtube"
    fields = (CHANNEL, DURATION_S, VIEW_COUNT)
    unseen = "no video of the YOUTUBE_PLAYLISTS playlists is named so (youtube/<playlist>/<id>)"

    def build(self, settings: Settings, state: State) -> list[Source]:
        from kb.sources.youtube.playlist import playlists

        return list(playlists(settings, state))

    def owns(self, payload: Payload) -> bool:
        return payload.get(KIND_FIELD) == VIDEO

    def close(self, sources: Sequence[Source]) -> None:
        from kb.sources.youtube.playlist import PlaylistSource, close

        close([s for s in sources if isinstance(s, PlaylistSource)])


KIND = Youtube()
