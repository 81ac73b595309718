"""YouTube playlists synced as sources, against a replaying Data API on 127.0.0.1, the MiniLM
embedder and embedded Qdrant: pages, delta sync, removals, quota days, unavailable videos."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ingest_fixtures import make_settings, run_script, script_env, write
from youtube_fixtures import KEY, RECORDED, WATCH_LATER_FLAT, Clock, Replay, filler

from kb.app.ingest import ingest_config, run
from kb.core.errors import IngestError
from kb.core.schema import PLAYLIST_REMOVED
from kb.core.settings import Settings
from kb.core.state import State
from kb.embedding.client import EmbedClient
from kb.ingest import lifecycle
from kb.ingest.options import IngestOptions
from kb.ingest.progress import Summary
from kb.ingest.run import ingest
from kb.sources.youtube import playlist as app_ingest
from kb.sources.youtube.playlist import UNAVAILABLE, UNLISTED, WAITING, PlaylistSource
from kb.sources.youtube.quota import Ledger
from kb.store.points import Store

RECORDED_IDS = [item["id"] for item in RECORDED]


def playlists(
    settings: Settings, replay: Replay, *, budget: int = 9000, clock: Clock | None = None,
    **values: Any,
) -> list[PlaylistSource]:  # fmt: skip
    settings = settings.model_copy(
        update={"YOUTUBE_API_URL": replay.url, "YOUTUBE_API_KEY": KEY, **values}
    )
    state = State(settings.STATE_DIR)
    ledger = Ledger(state.youtube_dir() / "quota.json", budget, clock or Clock("2026-11-30T12:00Z"))
    return app_ingest.playlists(settings, state, ledger=ledger, backoff_s=0.0)


def sync(settings: Settings, client: EmbedClient, store: Store, source: PlaylistSource) -> Summary:
    try:
        return ingest(source, client, store, State(settings.STATE_DIR), ingest_config(settings))
    finally:
        assert source.api is not None
        source.api.close()


def live(store: Store) -> dict[str, dict[str, Any]]:
    """{source: first chunk's payload} of the notes not soft-deleted."""
    return {
        p["source"]: p
        for _, p in store.payloads()
        if p["chunk_index"] == 0 and not p.get("deleted_at")
    }


def test_a_120_video_playlist_over_3_pages_is_stored_once_then_only_its_pages_are_asked(
    settings: Settings, client: EmbedClient, store: Store, youtube_api: Replay
):
    youtube_api.playlists["PLcourse"] = youtube_api.add(*(filler(n) for n in range(120)))
    [source] = playlists(settings, youtube_api, YOUTUBE_PLAYLISTS="PLcourse")
    summary = sync(settings, client, store, source)
    assert len(summary.added) == 120 and not summary.failed
    assert (youtube_api.calls("playlistItems"), youtube_api.calls("videos")) == (3, 3)
    stored = live(store)["youtube/PLcourse/lecture0007"]
    assert stored["kind"] == "video" and stored["origin"] == "youtube/PLcourse"
    assert stored["duration_s"] == 27 * 60 and stored["view_count"] == 1007
    assert stored["url"] == "https://www.youtube.com/watch?v=lecture0007"
    assert stored["channel"] == "Distributed Systems Notes" and stored["language"] == "en"
    assert stored["categories"] == ["Technology", "Knowledge"]
    assert stored["uploaded"] == "2020-01-08T10:00:00Z"
    assert stored["thumbnail"] == "https://i.ytimg.com/vi/raftConsens/hqdefault.jpg"

    youtube_api.requests.clear()
    [source] = playlists(settings, youtube_api, YOUTUBE_PLAYLISTS="PLcourse")
    again = sync(settings, client, store, source)
    assert len(again.unchanged) == 120 and not again.added and not again.replaced
    assert (youtube_api.calls("playlistItems"), youtube_api.calls("videos")) == (3, 0)


def test_a_removed_video_is_soft_deleted_and_restored_unembedded_when_added_back(
    settings: Settings, client: EmbedClient, store: Store, youtube_api: Replay
):
    youtube_api.playlists["PLmix"] = list(RECORDED_IDS)
    [source] = playlists(settings, youtube_api, YOUTUBE_PLAYLISTS="PLmix")
    assert len(sync(settings, client, store, source).added) == len(RECORDED_IDS)

    youtube_api.playlists["PLmix"].remove("raftConsens")
    [source] = playlists(settings, youtube_api, YOUTUBE_PLAYLISTS="PLmix")
    removed = sync(settings, client, store, source)
    assert removed.deleted == ["youtube/PLmix/raftConsens"]
    [gone] = lifecycle.list_deleted(store, cause=PLAYLIST_REMOVED)
    assert (gone.source, gone.origin) == ("youtube/PLmix/raftConsens", "youtube/PLmix")
    assert "youtube/PLmix/raftConsens" not in live(store)

    youtube_api.playlists["PLmix"].append("raftConsens")
    youtube_api.requests.clear()
    [source] = playlists(settings, youtube_api, YOUTUBE_PLAYLISTS="PLmix")
    back = sync(settings, client, store, source)
    assert back.restored == ["youtube/PLmix/raftConsens"]
    assert not back.added and not back.replaced  # nothing written, so nothing embedded
    assert youtube_api.calls("videos") == 0
    assert "youtube/PLmix/raftConsens" in live(store)


def test_a_playlist_losing_most_of_its_videos_stops_in_its_own_words_until_confirmed(
    settings: Settings, client: EmbedClient, store: Store, youtube_api: Replay
):
    youtube_api.playlists["PLmix"] = list(RECORDED_IDS)
    settings = settings.model_copy(update={"YOUTUBE_PLAYLISTS": "PLmix", "YOUTUBE_API_KEY": KEY,
                                           "YOUTUBE_API_URL": youtube_api.url})  # fmt: skip
    assert len(run(settings, client, store).added) == 6
    youtube_api.playlists["PLmix"] = RECORDED_IDS[:1]
    with pytest.raises(IngestError) as stopped:
        run(settings, client, store)
    message = str(stopped.value)
    assert message.startswith("YOUTUBE_PLAYLISTS PLmix: 5 of its 6 videos are gone from the")
    assert "more than NOTE_FOLDERS_MAX_DELETE=0.5; nothing was changed" in message
    assert "`uv run ingest.py --allow-deletes`" in message
    assert "unmounted" not in message and "drive" not in message  # no folder's wording
    assert len(live(store)) == 6

    confirmed = run(settings, client, store, IngestOptions(allow_deletes=True))
    assert sorted(confirmed.deleted) == sorted(f"youtube/PLmix/{v}" for v in RECORDED_IDS[1:])
    assert {n.cause for n in lifecycle.list_deleted(store)} == {PLAYLIST_REMOVED}


def test_the_daily_budget_stops_a_sync_midway_and_the_next_pacific_day_resumes_it(
    settings: Settings, client: EmbedClient, store: Store, youtube_api: Replay
):
    youtube_api.playlists["PLcourse"] = youtube_api.add(*(filler(n) for n in range(60)))
    late_evening = Clock("2026-11-30T07:30:00Z")  # 23:30 on the 29th in California
    # 2 pages + 1 videos.list call: 50 videos, the other 10 wait
    [source] = playlists(settings, youtube_api, budget=3, clock=late_evening,
                         YOUTUBE_PLAYLISTS="PLcourse")  # fmt: skip
    first = sync(settings, client, store, source)
    assert len(first.added) == 50 and first.skipped == {WAITING: 10} and not first.failed

    [source] = playlists(settings, youtube_api, budget=3, clock=late_evening,
                         YOUTUBE_PLAYLISTS="PLcourse")  # fmt: skip
    spent = sync(settings, client, store, source)  # same quota day: not one request sent
    assert youtube_api.calls("playlistItems") == 2 and not spent.deleted
    assert spent.skipped == {UNLISTED: 1} and not spent.ingested
    assert len(live(store)) == 50  # a playlist not listed to its end deletes nothing

    after_midnight = Clock("2026-11-30T08:30:00Z")  # 00:30 on the 30th in California
    [source] = playlists(settings, youtube_api, budget=3, clock=after_midnight,
                         YOUTUBE_PLAYLISTS="PLcourse")  # fmt: skip
    resumed = sync(settings, client, store, source)
    assert len(resumed.added) == 10 and len(resumed.unchanged) == 50 and not resumed.skipped
    assert len(live(store)) == 60


def test_deleted_and_private_entries_are_counted_and_never_stored(
    settings: Settings, client: EmbedClient, store: Store, youtube_api: Replay
):
    youtube_api.playlists["PLold"] = ["chessShort1", "delVideo001", "privVideo01", "goneNoTrace"]
    [source] = playlists(settings, youtube_api, YOUTUBE_PLAYLISTS="PLold")
    summary = sync(settings, client, store, source)
    assert summary.added == ["youtube/PLold/chessShort1"]
    assert summary.skipped == {UNAVAILABLE: 3} and not summary.failed
    [(_, asked)] = [r for r in youtube_api.requests if r[0] == "videos"]
    assert asked["id"] == ["chessShort1"]  # the placeholders cost no videos.list unit
    assert sorted(live(store)) == ["youtube/PLold/chessShort1"]


def test_titles_in_other_languages_are_stored_as_written(
    settings: Settings, client: EmbedClient, store: Store, youtube_api: Replay
):
    youtube_api.playlists["PLworld"] = ["shogiJapan1", "ajedrezEsp1"]
    [source] = playlists(settings, youtube_api, YOUTUBE_PLAYLISTS="PLworld")
    sync(settings, client, store, source)
    stored = live(store)
    shogi, chess = stored["youtube/PLworld/shogiJapan1"], stored["youtube/PLworld/ajedrezEsp1"]
    assert (
        shogi["title"] == RECORDED[4]["snippet"]["title"] and shogi["channel"] == "将棋チャンネル"
    )
    assert "矢倉囲いを初心者向けに解説" in shogi["text"]
    assert (shogi["language"], chess["language"]) == ("ja", "es")
    assert chess["title"] == "Aperturas de ajedrez: la defensa siciliana"


def test_watch_later_is_listed_from_yt_dlps_flat_playlist(
    settings: Settings, client: EmbedClient, store: Store, youtube_api: Replay
):
    from yt_dlp import YoutubeDL

    def replayed(url: str) -> dict[str, Any]:
        # what flat_playlist returns, minus the network: yt-dlp processes the recorded result
        with YoutubeDL({"extract_flat": "in_playlist", "quiet": True}) as ydl:
            assert url == WATCH_LATER_FLAT["webpage_url"]
            return ydl.sanitize_info(ydl.process_ie_result(dict(WATCH_LATER_FLAT), download=False))

    [source] = playlists(settings, youtube_api, YOUTUBE_PLAYLISTS="WL",
                         YOUTUBE_COOKIES_FILE=str(settings.STATE_DIR / "cookies.txt"))  # fmt: skip
    source.extract = replayed
    summary = sync(settings, client, store, source)
    assert sorted(summary.added) == ["youtube/WL/chessShort1", "youtube/WL/raftConsens"]
    assert summary.skipped == {UNAVAILABLE: 2}
    assert (youtube_api.calls("playlistItems"), youtube_api.calls("videos")) == (0, 1)


def test_without_api_key_or_cookies_the_playlists_fail_by_setting_and_notes_still_sync(
    tmp_path: Path, embedder_url: str, youtube_api: Replay
):
    from kb.app.backend import embed_client, open_store

    settings = make_settings(tmp_path, embedder_url, YOUTUBE_PLAYLISTS="PLmix,WL",
                             YOUTUBE_API_URL=youtube_api.url)  # fmt: skip
    write(settings.NOTES_DIR / "kimchi.md", "# Kimchi\n\nSalt the cabbage.\n")
    with open_store(settings) as store, embed_client(settings) as client:
        summary = run(settings, client, store)
    assert summary.added == ["kimchi.md"]
    reasons = {f.source: f.reason for f in summary.failed}
    assert "YOUTUBE_API_KEY is not set" in reasons["youtube/PLmix"]
    assert "YOUTUBE_COOKIES_FILE" in reasons["youtube/WL"]
    assert youtube_api.requests == []


def test_ingest_py_youtube_only_syncs_the_playlists_and_leaves_the_inbox(
    tmp_path: Path, embedder_url: str, youtube_api: Replay
):
    youtube_api.playlists["PLx"] = ["raftConsens", "privVideo01"]
    settings = make_settings(tmp_path, embedder_url)
    write(settings.NOTES_DIR / "kimchi.md", "# Kimchi\n\nSalt the cabbage.\n")
    env = script_env(settings, YOUTUBE_PLAYLISTS="PLx", YOUTUBE_API_KEY=KEY,
                     YOUTUBE_API_URL=youtube_api.url)  # fmt: skip
    done = run_script("ingest.py", "--youtube-only", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "ingested 1 notes" in done.stdout and "skipped: 1 deleted or private videos" in done.stdout
    )
    assert (settings.NOTES_DIR / "kimchi.md").exists()  # the inbox was not synced
