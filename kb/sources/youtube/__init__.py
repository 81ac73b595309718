"""YouTube playlists as a source: the Data API, quota, captions."""

from kb.sources.youtube.playlist import KIND as KIND
