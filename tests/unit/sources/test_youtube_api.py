"""The YouTube Data API client, quota ledger, Watch Later's yt-dlp result and a playlist's
listing, against the replaying Data API on 127.0.0.1 (no embedder, no store)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from youtube_fixtures import ERRORS, KEY, RECORDED, WATCH_LATER_FLAT, Clock, Replay, filler

from kb.core import schema as kb_schema
from kb.core.errors import ConfigError
from kb.core.schema import ChunkRecord, fingerprint, point_id
from kb.sources.youtube import watch_later
from kb.sources.youtube.api import Video, YoutubeApi, YoutubeError, iso_duration
from kb.sources.youtube.playlist import UNAVAILABLE, WAITING, PlaylistSource
from kb.sources.youtube.quota import Ledger, QuotaReached
from kb.sources.youtube.video_note import clean_description


def api(replay: Replay, tmp_path: Path, *, budget: int = 100, key: str = KEY,
        clock: Clock | None = None, sleeps: list[float] | None = None) -> YoutubeApi:  # fmt: skip
    ledger = Ledger(tmp_path / "quota.json", budget, clock or Clock("2026-11-30T12:00Z"))
    waits = sleeps if sleeps is not None else []
    return YoutubeApi(replay.url, key, ledger, retries=2, backoff_s=0.5, sleep=waits.append)


def source(replay: Replay, tmp_path: Path, playlist: str, **options) -> PlaylistSource:
    return PlaylistSource(playlist, tmp_path, api(replay, tmp_path, **options))


def test_iso_8601_durations_become_seconds():
    assert iso_duration("PT1H2M3S") == 3723
    assert iso_duration("PT10M") == 600
    assert iso_duration("PT45S") == 45
    assert iso_duration("P1DT2H") == 93600
    assert iso_duration("P0D") == 0  # a live stream
    assert iso_duration("") is None and iso_duration("10 minutes") is None


def test_a_videos_list_item_becomes_a_video_with_every_field():
    video = Video.from_api(RECORDED[0])
    assert video.to_dict() == {
        "id": "chessShort1",
        "title": "The Fried Liver Attack in 5 minutes",
        "channel": "Chess Coach Anna",
        "description": RECORDED[0]["snippet"]["description"],
        "url": "https://www.youtube.com/watch?v=chessShort1",
        "duration_s": 312,
        "view_count": 184233,
        "uploaded": "2023-05-14T16:00:08Z",
        "categories": ["Chess", "Hobby"],
        "language": "en",
        "thumbnail": "https://i.ytimg.com/vi/chessShort1/hqdefault.jpg",
        "fetched": None,  # set by the source, which knows the time
    }


def test_descriptions_lose_links_sponsors_and_hashtags_but_keep_chapter_titles():
    cleaned = clean_description(RECORDED[0]["snippet"]["description"])
    assert cleaned == (
        "Learn the Fried Liver Attack, a sharp chess opening against the Two Knights Defense.\n"
        "\nIntro\nThe knight sacrifice on f7\nTraps to know"
    )


def test_a_5xx_is_retried_with_backoff_then_the_call_succeeds(youtube_api: Replay, tmp_path):
    youtube_api.playlists["PLx"] = ["chessShort1"]
    youtube_api.faults = [(503, ERRORS["backendError"]), (500, {"error": {"code": 500}})]
    sleeps: list[float] = []
    client = api(youtube_api, tmp_path, sleeps=sleeps)
    assert [e.id for page in client.playlist("PLx") for e in page] == ["chessShort1"]
    assert sleeps == [0.5, 1.0]  # exponential backoff
    assert client.ledger.spent() == 3  # a failed request costs its unit too


def test_a_call_failing_past_its_retries_is_a_named_failure(youtube_api: Replay, tmp_path):
    youtube_api.faults = [(503, ERRORS["backendError"])] * 3
    client = api(youtube_api, tmp_path)
    with pytest.raises(YoutubeError, match=r"videos\.list failed after 3 tries: HTTP 503"):
        client.videos(["chessShort1"])


def test_a_rate_limit_is_retried(youtube_api: Replay, tmp_path):
    limited = {"error": {"code": 403, "message": "Rate limit",
                         "errors": [{"reason": "rateLimitExceeded"}]}}  # fmt: skip
    youtube_api.faults = [(429, {"error": {"code": 429}}), (403, limited)]
    assert [v.id for v in api(youtube_api, tmp_path).videos(["raftConsens"])] == ["raftConsens"]


def test_quota_exceeded_is_not_retried_and_closes_the_day(youtube_api: Replay, tmp_path):
    youtube_api.faults = [(403, ERRORS["quotaExceeded"])]
    client = api(youtube_api, tmp_path, budget=50)
    with pytest.raises(QuotaReached, match="quotaExceeded"):
        client.videos(["chessShort1"])
    assert len(youtube_api.requests) == 1 and client.ledger.left() == 0


def test_a_refused_key_names_the_setting(youtube_api: Replay, tmp_path):
    with pytest.raises(YoutubeError, match=r"YOUTUBE_API_KEY was refused .*API key not valid"):
        api(youtube_api, tmp_path, key="wrong").videos(["chessShort1"])


def test_the_ledger_counts_per_pacific_day_and_survives_restarts(tmp_path: Path):
    clock = Clock("2026-11-30T07:59:00Z")  # 23:59 on the 29th in California
    Ledger(tmp_path / "q.json", 3, clock).spend(2)
    again = Ledger(tmp_path / "q.json", 3, clock)
    assert again.spent() == 2
    with pytest.raises(QuotaReached, match="2 of YOUTUBE_DAILY_UNITS=3 units spent on 2026-11-29"):
        again.spend(2)
    clock.now = clock.now.replace(hour=8, minute=1)  # 00:01 Pacific: a new quota day
    assert again.spent() == 0 and again.left() == 3


def test_watch_later_entries_come_from_yt_dlps_processed_flat_playlist():
    from yt_dlp import YoutubeDL

    with YoutubeDL({"extract_flat": "in_playlist", "quiet": True}) as ydl:
        info = ydl.sanitize_info(ydl.process_ie_result(dict(WATCH_LATER_FLAT), download=False))
    entries = watch_later.entries(info)
    assert [(e.id, e.private) for e in entries] == [
        ("raftConsens", False),
        ("chessShort1", False),
        ("privVideo01", True),
        ("delVideo001", True),
    ]


def test_watch_later_without_cookies_names_the_settings():
    with pytest.raises(ConfigError, match=r"YOUTUBE_COOKIES_FILE .* or YOUTUBE_COOKIES_BROWSER"):
        watch_later.options()
    assert watch_later.options(cookies_browser="firefox")["cookiesfrombrowser"] == ("firefox",)
    assert watch_later.options("c.txt")["extract_flat"] == "in_playlist"


def test_a_failing_api_fails_the_playlist_by_name_and_deletes_nothing(
    youtube_api: Replay, tmp_path: Path
):
    youtube_api.playlists["PLx"] = ["chessShort1", "raftConsens"]
    youtube_api.faults = [(503, ERRORS["backendError"])] * 3
    playlist = source(youtube_api, tmp_path, "PLx")
    listing = playlist.listing(everything=True)
    [failure] = listing.failed
    assert failure.source == "youtube/PLx"
    assert "playlistItems.list failed after 3 tries" in failure.reason
    assert listing.items == [] and playlist.holds("youtube/PLx/anything")


@pytest.mark.parametrize("videos", [1430, 1500])
def test_a_first_sync_spends_one_unit_per_50_entries_and_per_50_videos(
    youtube_api: Replay, tmp_path: Path, videos: int
):
    youtube_api.playlists["PLbig"] = youtube_api.add(*(filler(n) for n in range(videos)))
    playlist = source(youtube_api, tmp_path, "PLbig", budget=10_000)
    listing = playlist.listing(everything=True)
    assert len(listing.items) == videos and not listing.skipped
    pages = math.ceil(videos / 50)
    assert (youtube_api.calls("playlistItems"), youtube_api.calls("videos")) == (pages, pages)
    assert playlist.api is not None and playlist.api.ledger.spent() == 2 * pages  # 58, 60
    again = source(youtube_api, tmp_path, "PLbig", budget=10_000)
    youtube_api.requests.clear()
    assert len(again.listing(everything=True).items) == videos
    assert youtube_api.calls("videos") == 0  # details are kept: later syncs list pages only


def test_a_budget_spent_while_listing_leaves_the_rest_waiting(youtube_api: Replay, tmp_path):
    youtube_api.playlists["PLx"] = ["chessShort1", "delVideo001"]
    playlist = source(youtube_api, tmp_path, "PLx", budget=1)  # the page, no videos.list
    listing = playlist.listing(everything=True)
    assert listing.skipped == {WAITING: 1, UNAVAILABLE: 1} and listing.items == []
    assert not listing.failed and playlist.holds("youtube/PLx/chessShort1")


def test_a_notes_fingerprint_is_the_one_stored_before_videos_existed(
    monkeypatch: pytest.MonkeyPatch,
):
    # pinned from the version before the video fields (payload layout 3): fields added since
    # leave a note that does not use them as it was (a new layout rewrites every note once)
    monkeypatch.setattr(kb_schema, "SCHEMA_VERSION", 3)
    note = ChunkRecord(text="Salt the cabbage.", source="kimchi.md", folders=[], title="Kimchi",
                       heading_path=["Kimchi"], chunk_index=0, tags=["recipes"], topic=None,
                       document_date="2024-03-01", char_start=0, char_end=17, line_start=1,
                       line_end=1)  # fmt: skip
    points = [(point_id("kimchi.md", 0), "Kimchi\n\nSalt the cabbage.", note)]
    before = "a91408029115de4cf64085609e8d0cb7f97e5e01f61b48a99300293799acc527"
    assert fingerprint("m", 384, 1, points) == before
    video = replace(note, kind="video", duration_s=312)
    assert fingerprint("m", 384, 1, [(*points[0][:2], video)]) != before


def test_a_failing_yt_dlp_listing_is_a_named_error(youtube_api: Replay, tmp_path: Path):
    cookies = tmp_path / "cookies.txt"
    cookies.write_text("# Netscape HTTP Cookie File\n")
    opts = watch_later.options(str(cookies))
    with pytest.raises(watch_later.WatchLaterError, match="yt-dlp could not list Watch Later"):
        watch_later.flat_playlist(f"{youtube_api.url}/no-such-playlist", opts)
