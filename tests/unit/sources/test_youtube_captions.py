"""Captions (YOUTUBE_CAPTIONS) and view count refreshes (YOUTUBE_REFRESH_DAYS), synced from the
replaying Data API and caption tracks on 127.0.0.1 into embedded Qdrant with MiniLM: recorded
`yt-dlp -J` info dicts go through yt-dlp's own processing, tracks through real HTTP."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import script_module
from youtube_fixtures import DATA, KEY, RECORDED, VIDEO_INFO, Clock, Replay, filler

from kb.app.backend import read_config
from kb.app.ingest import ingest_config
from kb.content.chunking import chunk_note, embedding_text
from kb.core.schema import TRANSCRIPT, Hit, at_moment
from kb.core.settings import Settings
from kb.core.state import State
from kb.embedding.client import EmbedClient
from kb.ingest.progress import Summary
from kb.ingest.run import ingest
from kb.search.filters import Filters
from kb.search.query import search
from kb.search.read import read_item
from kb.sources.youtube.api import Video
from kb.sources.youtube.captions import (
    CaptionError,
    Captions,
    Stored,
    clock,
    options,
    parse_json3,
    parse_vtt,
    pick,
    windows,
)
from kb.sources.youtube.playlist import CAPTIONS_DIR, close, playlists
from kb.sources.youtube.quota import Ledger
from kb.sources.youtube.video_note import video_note
from kb.store.points import Store

CAPTIONED = ["chessLong01", "chessShort1", "raftConsens", "shogiJapan1"]
PHRASE = "the king walks a small triangle and so hands the move back to his opponent"


def body(name: str) -> bytes:
    return (DATA / "timedtext" / name).read_bytes()


def sync(
    settings: Settings, client: EmbedClient, store: Store, replay: Replay, *,
    clock_: Clock | None = None, video_info: Callable[[str], dict[str, Any]] | None = None,
    **values: Any,
) -> Summary:  # fmt: skip
    """One run of the playlist PLcap (YOUTUBE_CAPTIONS on, unless `values` say otherwise)."""
    settings = settings.model_copy(update={"YOUTUBE_API_URL": replay.url, "YOUTUBE_API_KEY": KEY,
                                           "YOUTUBE_PLAYLISTS": "PLcap", "YOUTUBE_CAPTIONS": True,
                                           **values})  # fmt: skip
    state = State(settings.STATE_DIR)
    ledger = Ledger(state.youtube_dir() / "quota.json", 9000, clock_ or Clock("2026-11-30T12:00Z"))
    sources = playlists(settings, state, ledger=ledger, backoff_s=0.0,
                        video_info=video_info or replay.video_info)  # fmt: skip
    summary = Summary()
    try:
        for source in sources:
            summary.add(ingest(source, client, store, state, ingest_config(settings)))
        return summary
    finally:
        close(sources)


def video_channel(video: str) -> str:
    return next(v["snippet"]["channelTitle"] for v in RECORDED if v["id"] == video)


def passages(store: Store, video: str) -> dict[str, str]:
    """{locator: text} of a video's caption passages."""
    return {
        p["locator"]: p["text"]
        for _, p in store.payloads(f"youtube/PLcap/{video}")
        if p["heading_path"] == [TRANSCRIPT]
    }


def counting(client: EmbedClient) -> list[int]:
    """Texts the client sends to the embedder from now on, per request."""
    sent: list[int] = []
    real = client.embed_documents

    def embed_documents(texts: Any) -> list[list[float]]:
        sent.append(len(texts))
        return real(texts)

    client.embed_documents = embed_documents  # type: ignore[method-assign]
    return sent


def test_uploaded_subtitles_come_before_automatic_ones_and_the_original_before_translations():
    long, shogi, raft = (VIDEO_INFO[v] for v in ("chessLong01", "shogiJapan1", "raftConsens"))
    assert (pick(long).language, pick(long).automatic, pick(long).ext) == ("en", False, "json3")
    assert pick(long, ["de"]).language == "de"  # YOUTUBE_CAPTIONS_LANGUAGES first
    assert pick(long, ["en"]).url.endswith("lang=en&fmt=json3")  # not en-GB (no json3, vtt)
    assert (pick(shogi).language, pick(shogi).automatic) == ("ja-orig", True)
    assert pick(shogi, ["en"]).language == "ja-orig"  # a machine translation is never picked
    assert (pick(raft).language, pick(raft).ext) == ("en-orig", "vtt")
    assert pick(VIDEO_INFO["chessShort1"]) is None


def test_the_extraction_options_name_deno_and_the_cookies_and_yt_dlp_takes_them(tmp_path: Path):
    from yt_dlp import YoutubeDL

    cookies = str(tmp_path / "cookies.txt")  # yt-dlp writes its cookie jar back there on close
    opts = options(cookies)
    assert opts["cookiefile"] == cookies and opts["ignore_no_formats_error"] is True
    assert "cookiefile" not in options() and options(cookies_browser="firefox")[
        "cookiesfrombrowser"] == ("firefox",)  # fmt: skip
    try:
        import deno
    except ImportError:  # the test group has no deno: yt-dlp then looks on PATH
        assert "js_runtimes" not in opts
    else:
        assert opts["js_runtimes"] == {"deno": {"path": deno.find_deno_bin()}}
        assert Path(deno.find_deno_bin()).is_file()
    with YoutubeDL(opts) as ydl:  # accepted as they are (yt-dlp checks js_runtimes)
        assert ydl.params["ignore_no_formats_error"] is True


def test_json3_and_webvtt_tracks_become_timed_passages_on_segment_boundaries():
    segments = parse_json3(body("chessLong01.en.json3"))
    assert segments[0] == (1200, segments[0][1]) and segments[0][1].startswith("Welcome back")
    passages_ = windows(segments)
    assert all(400 <= len(t) <= 1200 for _, t in passages_[:-1])
    assert " ".join(t for _, t in passages_) == " ".join(t for _, t in segments)
    assert (754, True) in [(s, PHRASE in t) for s, t in passages_]

    spoken = parse_vtt(body("raftConsens.en.vtt"))  # rolling automatic cues, inline timings
    text = " ".join(t for _, t in spoken)
    assert text.startswith("so a raft cluster elects one leader and every write goes through")
    assert "<c>" not in text and text.count("raft cluster elects") == 1
    assert [s for s, _ in spoken] == sorted(s for s, _ in spoken) and spoken[1][0] == 2410

    with pytest.raises(CaptionError, match=r"^not a WebVTT caption track \(ParseError\)$"):
        parse_vtt(b"WEBVTT\n\nsecret words, no cue timings\n")  # named, never quoted
    shogi = parse_json3(body("shogiJapan1.ja.json3"))  # automatic: words as segs, "\n" events
    assert shogi[-1] == (19500, "最後に穴熊囲いとの違いを見てみましょう")
    assert (clock(754), clock(3723), clock(5)) == ("12:34", "1:02:03", "0:05")
    watch = "https://www.youtube.com/watch?v=chessLong01"
    assert at_moment(watch, [TRANSCRIPT], "12:34") == watch + "&t=754s"
    assert at_moment(watch, ["Endgames", "12:34"], "12:34") == watch  # a description's heading


def test_a_captioned_video_is_found_by_a_phrase_only_its_captions_hold_at_its_moment(
    settings: Settings, client: EmbedClient, store: Store, youtube_api: Replay
):
    youtube_api.playlists["PLcap"] = CAPTIONED
    summary = sync(settings, client, store, youtube_api)
    assert len(summary.added) == 4 and not summary.failed and not summary.notices
    assert youtube_api.calls("timedtext") == 3  # chessShort1 lists no track
    assert all(PHRASE not in json.dumps(i) for i in youtube_api.videos.values())

    hits = search(store, client, "king walks a triangle to hand the move back to the opponent",
                  k=3, filters=Filters(kind="video"))  # fmt: skip
    best = hits[0]
    assert best.source == "youtube/PLcap/chessLong01" and PHRASE in best.text
    assert best.locator == "12:34" and best.heading_path == [TRANSCRIPT]
    assert best.url == "https://www.youtube.com/watch?v=chessLong01&t=754s"
    assert best.title == VIDEO_INFO["chessLong01"]["title"] and best.channel == video_channel(
        "chessLong01"
    )
    printed = script_module("query.py").format_hit(1, best)
    assert "watch?v=chessLong01&t=754s" in printed and "12:34" in printed

    # the description stays chunk 0, its link without a moment
    [zero] = [p for _, p in store.payloads(best.source) if p["chunk_index"] == 0]
    assert zero["text"].startswith("# Complete guide to chess endgames")
    assert Hit.from_payload(0.5, zero).url == "https://www.youtube.com/watch?v=chessLong01"

    # read_note reads a video from what the index stored (it has no file), moment by moment
    shown = read_item(read_config(settings), [store], best.source, 1, 2000).text
    [moment] = [line for line in shown.splitlines() if "\t[12:34] " in line]
    assert PHRASE in moment and "https://www.youtube.com/watch?v=chessLong01" in shown

    # a video without captions: none stored, and that is remembered (never asked again)
    assert passages(store, "chessShort1") == {}
    kept = Captions(State(settings.STATE_DIR).youtube_dir() / CAPTIONS_DIR, None)  # type: ignore[arg-type]
    assert kept.get("chessShort1") is not None and kept.get("chessShort1").segments == []
    asked: list[str] = []

    def extraction(video_id: str) -> dict[str, Any]:
        asked.append(video_id)
        return youtube_api.video_info(video_id)

    youtube_api.requests.clear()
    again = sync(settings, client, store, youtube_api, video_info=extraction)
    assert len(again.unchanged) == 4 and not again.replaced
    assert asked == [] and youtube_api.calls("timedtext") == 0


def test_captions_in_other_languages_are_stored_as_spoken_and_found_by_their_words(
    settings: Settings, client: EmbedClient, store: Store, youtube_api: Replay
):
    youtube_api.playlists["PLcap"] = ["shogiJapan1"]
    sync(settings, client, store, youtube_api, YOUTUBE_CAPTIONS_LANGUAGES="en")
    [(_, asked)] = [r for r in youtube_api.requests if r[0] == "timedtext"]
    assert (asked["lang"], "tlang" in asked) == (["ja"], False)  # the original, not English
    assert passages(store, "shogiJapan1") == {
        "0:00": "皆さんこんにちは今日は矢倉囲いの組み方を解説します まず角道を止めて銀を上がります "
        "金銀三枚で玉をしっかり守るのが矢倉の基本です 最後に穴熊囲いとの違いを見てみましょう"
    }
    [hit] = search(store, client, "穴熊囲い", k=1, mode="keyword")
    assert hit.source == "youtube/PLcap/shogiJapan1" and hit.locator == "0:00"
    assert hit.url == "https://www.youtube.com/watch?v=shogiJapan1&t=0s"
    assert hit.language == "ja" and hit.channel == "将棋チャンネル"


def test_a_caption_fetch_that_fails_is_noted_and_fetched_by_the_next_run(
    settings: Settings, client: EmbedClient, store: Store, youtube_api: Replay
):
    youtube_api.playlists["PLcap"] = ["raftConsens"]
    youtube_api.caption_faults = [503]
    first = sync(settings, client, store, youtube_api)
    assert first.added == ["youtube/PLcap/raftConsens"] and not first.failed  # stored anyway
    [notice] = first.notices
    assert notice.source == "youtube/PLcap/raftConsens"
    assert "captions not fetched (HTTP 503" in notice.reason and "next run" in notice.reason
    assert passages(store, "raftConsens") == {}

    second = sync(settings, client, store, youtube_api)
    assert second.replaced == ["youtube/PLcap/raftConsens"] and not second.notices
    held = passages(store, "raftConsens")
    assert list(held) == ["0:00"] and held["0:00"].startswith("so a raft cluster elects one")
    assert "leader crashes" in held["0:00"] and youtube_api.calls("videos") == 1


def test_captions_turned_off_are_removed_and_turned_on_come_back_without_fetching_again(
    settings: Settings, client: EmbedClient, store: Store, youtube_api: Replay
):
    youtube_api.playlists["PLcap"] = ["chessLong01", "raftConsens"]
    before = sync(settings, client, store, youtube_api, YOUTUBE_CAPTIONS=False)  # stored without
    assert len(before.added) == 2 and youtube_api.calls("timedtext") == 0
    description = {p["text"] for _, p in store.payloads("youtube/PLcap/chessLong01")}

    on = sync(settings, client, store, youtube_api)  # already stored videos get theirs
    assert len(on.replaced) == 2 and youtube_api.calls("timedtext") == 2
    assert len(passages(store, "chessLong01")) == 21 and "12:34" in passages(store, "chessLong01")

    sent = counting(client)
    off = sync(settings, client, store, youtube_api, YOUTUBE_CAPTIONS=False)
    assert len(off.replaced) == 2 and sent == []  # the descriptions' vectors are cached
    assert passages(store, "chessLong01") == {} and passages(store, "raftConsens") == {}
    assert {p["text"] for _, p in store.payloads("youtube/PLcap/chessLong01")} == description

    again = sync(settings, client, store, youtube_api)
    assert len(again.replaced) == 2 and youtube_api.calls("timedtext") == 2  # kept: not refetched
    assert len(passages(store, "chessLong01")) == 21 and sent == []


def test_view_counts_older_than_the_refresh_interval_are_updated_in_place_for_a_unit_per_50(
    settings: Settings, client: EmbedClient, store: Store, youtube_api: Replay
):
    youtube_api.playlists["PLcap"] = youtube_api.add(*(filler(n) for n in range(60)))
    youtube_api.playlists["PLtwo"] = youtube_api.playlists["PLcap"][:10]  # in both playlists
    both = {"YOUTUBE_CAPTIONS": False, "YOUTUBE_PLAYLISTS": "PLcap,PLtwo"}
    day = "2026-11-{:02d}T12:00Z"
    first = sync(settings, client, store, youtube_api, clock_=Clock(day.format(2)), **both)
    assert len(first.added) == 70
    for video in youtube_api.playlists["PLcap"]:  # fillers: copies, not the recorded items
        stats = youtube_api.videos[video]["statistics"]
        stats["viewCount"] = str(int(stats["viewCount"]) + 500)

    def units(when: str) -> int:
        return Ledger(State(settings.STATE_DIR).youtube_dir() / "quota.json", 9000,
                      Clock(when)).spent()  # fmt: skip

    sent = counting(client)
    youtube_api.requests.clear()
    soon = sync(settings, client, store, youtube_api, clock_=Clock(day.format(8)), **both)
    assert len(soon.unchanged) == 70 and youtube_api.calls("videos") == 0  # 6 days: not yet
    assert units(day.format(8)) == 2 + 1  # the pages

    later = sync(settings, client, store, youtube_api, clock_=Clock(day.format(10)), **both)
    assert len(later.unchanged) == 70 and not later.replaced and sent == []
    asked = [q for call, q in youtube_api.requests if call == "videos"]
    assert [q["part"] for q in asked] == [["statistics"]] * math.ceil(60 / 50)  # each id once
    assert units(day.format(10)) == 3 + 2  # the pages, and 1 unit per 50 view counts
    counts = {(p["source"], p["chunk_index"]): p["view_count"] for _, p in store.payloads()}
    assert counts["youtube/PLcap/lecture0007", 0] == 1507
    assert counts["youtube/PLtwo/lecture0007", 0] == 1507  # its other playlist's points too
    assert sorted(set(counts.values())) == [1500 + n for n in range(60)]
    details = json.loads((State(settings.STATE_DIR).youtube_dir() / "videos.json").read_text())
    assert details["lecture0007"]["fetched"].startswith("2026-11-10T12:00")

    youtube_api.requests.clear()
    same_day = sync(settings, client, store, youtube_api, clock_=Clock(day.format(10)), **both)
    assert len(same_day.unchanged) == 70 and youtube_api.calls("videos") == 0
    never = sync(settings, client, store, youtube_api, clock_=Clock(day.format(30)),
                 YOUTUBE_REFRESH_DAYS=0, **both)  # fmt: skip
    assert len(never.unchanged) == 70 and youtube_api.calls("videos") == 0


def test_a_videos_description_is_chunked_as_before_and_its_captions_carry_its_context():
    video = Video.from_api(RECORDED[1])  # chessLong01
    stored = Stored("en", False, parse_json3(body("chessLong01.en.json3")))
    plain = chunk_note(video_note("v", Path("v"), video))
    note = video_note("v", Path("v"), video, stored)
    captioned = chunk_note(note)
    assert [c.text for c in captioned[: len(plain)]] == [c.text for c in plain]
    tail = captioned[len(plain) :]
    assert len(tail) == 21 and all(c.heading_path == (TRANSCRIPT,) for c in tail)
    assert [c.locator for c in tail[:2]] == ["0:01", "0:48"]
    assert embedding_text(tail[0], note).startswith(
        f"{video.title} > {TRANSCRIPT}\nYouTube video by Saint Louis Chess Club\n\nWelcome back"
    )
