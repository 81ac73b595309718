"""YouTube playlists as a source: the Data API, quota, captions."""
