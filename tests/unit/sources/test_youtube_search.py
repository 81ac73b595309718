"""Saved videos beside notes: search_notes' video filters and browse_notes' ordered listing, on
the recorded videos synced from the replaying Data API into embedded Qdrant (MiniLM)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from helpers import free_port
from ingest_fixtures import make_settings, run_script, script_env, write
from mcp_fixtures import call_tool, error_text, results, serve_in_process, tool_answer
from youtube_fixtures import KEY, replaying

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.core.settings import Settings
from kb.search.browse import browse
from kb.search.filters import Filters
from kb.search.query import search

KIMCHI = "# Kimchi\n\nSalt a napa cabbage, rub in gochugaru paste, ferment two days.\n"
OPENINGS = "# Chess openings\n\nMy notes on the Italian game and the Two Knights Defense.\n"
SHORT = {"chessShort1": 312, "raftConsens": 481, "ajedrezEsp1": 599, "chessTen600": 600}
LONG = {"shogiJapan1": 870, "chessLong01": 3723}


def name(video: str) -> str:
    return f"youtube/PLsaved/{video}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder_transport) -> Settings:
    """Two notes and the six recorded videos, ingested once; tests open the store read-only."""
    root = tmp_path_factory.mktemp("videos")
    with replaying() as replay:
        replay.playlists["PLsaved"] = [*SHORT, *LONG]
        settings = make_settings(root, IN_PROCESS_EMBED_URL, YOUTUBE_PLAYLISTS="PLsaved",
                                 YOUTUBE_API_KEY=KEY, YOUTUBE_API_URL=replay.url)  # fmt: skip
        write(settings.NOTES_DIR / "kimchi.md", KIMCHI)
        write(settings.NOTES_DIR / "chess-openings.md", OPENINGS)
        with (
            open_store(settings) as store,
            embed_client(settings, transport=embedder_transport) as client,
        ):
            summary = run(settings, client, store)
    assert len(summary.added) == 8 and not summary.failed
    return settings


@pytest.fixture
def opened(corpus: Settings, embedder_transport: httpx.BaseTransport) -> Iterator:
    with (
        open_store(corpus) as store,
        embed_client(corpus, transport=embedder_transport) as client,
    ):
        yield store, client


def found(opened, query: str, **filters) -> list[str]:
    store, client = opened
    hits = search(store, client, query, k=20, filters=Filters(**filters))
    return sorted(h.source or "" for h in hits)


def test_max_duration_600_finds_exactly_the_videos_of_ten_minutes_or_less(opened):
    expected = sorted(name(v) for v in SHORT)
    assert found(opened, "chess", max_duration=600) == expected
    assert found(opened, "lecture", max_duration="10m") == expected
    assert found(opened, "chess", min_duration="1h") == [name("chessLong01")]
    assert found(opened, "chess", min_duration=601, max_duration="1h30m") == sorted(
        name(v) for v in LONG
    )


def test_chess_videos_shorter_than_10_minutes_come_back_with_their_video_fields(opened):
    store, client = opened
    filters = Filters(kind="video", max_duration="10m", category="Chess")
    hits = search(store, client, "chess videos", k=10, filters=filters)
    assert sorted(h.source for h in hits) == sorted(
        name(v) for v in ("chessShort1", "ajedrezEsp1", "chessTen600")
    )
    short = next(h for h in hits if h.source == name("chessShort1"))
    assert (short.kind, short.duration_s, short.view_count) == ("video", 312, 184233)
    assert short.url == "https://www.youtube.com/watch?v=chessShort1"
    assert short.channel == "Chess Coach Anna" and short.categories == ["Chess", "Hobby"]
    assert short.uploaded == "2023-05-14T16:00:08Z" and short.language == "en"
    assert "lichess.org" not in short.text and "use code" not in short.text  # noise left out
    assert "The knight sacrifice on f7" in short.text and "1:05" not in short.text


def test_kind_channel_language_and_upload_dates_filter_in_the_same_query(opened):
    assert found(opened, "chess", kind="note") == ["chess-openings.md", "kimchi.md"]
    assert len(found(opened, "chess", kind="video")) == 6
    assert found(opened, "chess", channel="Chess Coach Anna") == [
        name("chessShort1"),
        name("chessTen600"),
    ]
    assert found(opened, "strategy", language="ja") == [name("shogiJapan1")]
    assert found(opened, "chess", language="es-419") == [name("ajedrezEsp1")]
    assert found(opened, "chess", uploaded_from="2023-01-01", uploaded_to="2024-01-20") == [
        name("chessShort1"),
        name("chessTen600"),
    ]


def test_bad_video_filters_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="max_duration: 'ten minutes'"):
        Filters(max_duration="ten minutes")
    with pytest.raises(ValueError, match="min_duration 700s is more than max_duration 600s"):
        Filters(min_duration=700, max_duration="10m")
    with pytest.raises(ValueError, match="kind must be one of note, video"):
        Filters(kind="podcast")


def test_browse_orders_by_a_field_pages_and_counts_without_a_query(opened):
    store, _ = opened
    by_length = browse(store, order_by="duration", order="asc", limit=100)
    assert [h.source for h in by_length.items] == [name(v) for v in (*SHORT, *LONG)]
    assert by_length.total == 6  # notes have no duration to order by
    page = browse(store, order_by="duration", order="asc", limit=2, offset=2)
    assert [h.source for h in page.items] == [name("ajedrezEsp1"), name("chessTen600")]
    views = browse(store, Filters(channel="Chess Coach Anna"), order_by="views", limit=5)
    assert [h.view_count for h in views.items] == [184233, 53001]
    newest = browse(store, order_by="uploaded", limit=1)
    assert [h.source for h in newest.items] == [name("chessTen600")]
    titles = browse(store, order_by="title", order="asc", limit=3)
    assert titles.total == 8
    assert [h.title for h in titles.items] == [
        "Aperturas de ajedrez: la defensa siciliana",
        "Chess openings",
        "Complete guide to chess endgames: king and pawn",
    ]
    counted = browse(store, Filters(max_duration=600), order_by="ingested", count_only=True)
    assert (counted.total, counted.items) == (4, [])


def test_browse_notes_lists_through_the_mcp_tool(
    corpus: Settings, tmp_path: Path, embedder_transport: httpx.BaseTransport
):
    copy = tmp_path / "qdrant"
    shutil.copytree(corpus.QDRANT_PATH, copy)
    settings = corpus.model_copy(update={"QDRANT_PATH": str(copy), "MCP_PORT": free_port()})
    with serve_in_process(settings, transport=embedder_transport) as server:
        shorts = {"order_by": "views", "kind": "video", "max_duration": "10m"}
        answer = call_tool(server.url, "browse_notes", shorts)
        assert [r["source"] for r in results(answer)] == [
            name(v) for v in ("chessShort1", "raftConsens", "chessTen600", "ajedrezEsp1")
        ]
        assert tool_answer(answer)["total"] == 4
        counted = call_tool(server.url, "browse_notes", {"count_only": True, "kind": "note"})
        assert tool_answer(counted) == {"total": 2, "results": []}
        bad = call_tool(server.url, "browse_notes", {"min_duration": "soon"})
        assert "browse_notes: min_duration: 'soon' is not a duration" in error_text(bad)
        chess = {"query": "chess", "kind": "video", "max_duration": 600, "k": 10}
        hits = results(call_tool(server.url, "search_notes", chess))
        assert sorted(h["source"] for h in hits) == sorted(name(v) for v in SHORT)


def test_query_py_finds_chess_videos_shorter_than_10_minutes(
    corpus: Settings, tmp_path: Path, embedder_url: str
):
    env = script_env(corpus, EMBED_URL=embedder_url)  # a script needs an embedder it can reach
    shown = run_script("query.py", "chess", "--kind", "video", "--max-duration", "10m",
                       "-k", "10", env=env, cwd=tmp_path)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if line[:1].isdigit()]
    assert len(lines) == 4 and all("youtube/PLsaved/" in line for line in lines)
    video = "youtube/PLsaved/chessShort1  https://www.youtube.com/watch?v=chessShort1  (5:12, Chess"
    assert any(video in line for line in lines), shown.stdout
    refused = run_script("query.py", "chess", "--max-duration", "soon", env=env, cwd=tmp_path)
    assert refused.returncode == 2 and "--max-duration: 'soon' is not a duration" in refused.stderr
