"""A YouTube playlist (YOUTUBE_PLAYLISTS) as a source: each video one item, its description
chunked like a note with the title and channel as every chunk's context.

Each video's `source` is `youtube/<playlist id>/<video id>` and its `origin` is
`youtube/<playlist id>`; the listing names every video the playlist holds, so each run is a full
sync of that playlist (kb.ingest.plan): a video removed from it is soft-deleted
(`playlist_removed`),
one added back is restored as it was, with nothing embedded.

Delta sync: a video's details are fetched once (`videos.list`, 50 ids a unit) and kept in
STATE_DIR/youtube/videos.json; later runs read them from there, so only the playlist's pages
(one unit per 50 entries) are asked again. A deleted or private video is counted among the
skipped and never stored. When the day's budget (kb.sources.youtube.quota) runs out, or the API
keeps failing,
the videos not fetched yet wait for the next run and nothing stored is deleted: a playlist not
listed to its end holds every video it held.

Watch Later (`WL`) is not readable through the Data API: its ids come from yt-dlp's flat
listing with the user's cookies (kb.sources.youtube.watch_later); its details from the API like any
other.

View counts older than YOUTUBE_REFRESH_DAYS are read again (`videos.list` part statistics, one
unit per 50) and handed to ingest as `refreshed`, which sets them on the stored points: the
view count is no part of a note's fingerprint, so nothing is embedded or rewritten for it.

With YOUTUBE_CAPTIONS, each listed video's captions are fetched once (kb.sources.youtube.captions,
no units)
and appended to its note as passages under the heading path `Transcript`, each located by the
time it starts at; a fetch that fails is a notice on the video and is tried again next run.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import httpx

from kb.content.notes import Note
from kb.core.errors import ConfigError, KbError
from kb.core.kinds import PROSE, Domain
from kb.core.schema import PLAYLIST_REMOVED, VIEW_COUNT
from kb.core.settings import Settings
from kb.core.state import State
from kb.sources.base import Failure, Item, Listing, SourceDefaults
from kb.sources.folder import parse as folder_names
from kb.sources.youtube import YoutubeSettings, captions, watch_later
from kb.sources.youtube.api import PAGE, Entry, YoutubeApi
from kb.sources.youtube.captions import CaptionError, Captions
from kb.sources.youtube.quota import Ledger, QuotaReached
from kb.sources.youtube.video_note import Details, video_note

log = logging.getLogger(__name__)

PREFIX = "youtube"  # first component of every video's `source`
DETAILS_NAME = "videos.json"
WAITING = "videos waiting for YouTube quota (next run)"
UNAVAILABLE = "deleted or private videos"
UNLISTED = "playlists not listed to their end (YouTube quota; next run)"
STALE = "view counts not refreshed (next run)"
CAPTIONS_DIR = "captions"


@dataclass(frozen=True)
class YoutubeConfig:
    """The YOUTUBE_* settings a sync reads (docs/guide/youtube.md), as plain values."""

    playlists: str  # YOUTUBE_PLAYLISTS: ids, comma-separated
    api_url: str
    api_key: str  # "": no Data API (each playlist fails, naming the setting)
    daily_units: int
    cookies_file: str
    cookies_browser: str
    captions: bool
    captions_languages: str  # comma-separated, preferred first
    refresh_days: int  # 0: view counts are never read again


@dataclass
class PlaylistSource(SourceDefaults):
    """One YOUTUBE_PLAYLISTS playlist (see the module docstring). `api` is None when no key is
    set (`problem` says so); `extract` lists Watch Later through yt-dlp."""

    playlist: str
    root: Path  # STATE_DIR/youtube: where the details are kept (nothing of the user's)
    api: YoutubeApi | None
    problem: str | None = None  # why this playlist cannot be synced (a setting missing)
    extract: Callable[[str], dict[str, Any]] | None = None
    captions: Captions | None = None  # YOUTUBE_CAPTIONS: where captions are kept, and fetched
    video_info: Callable[[str], dict[str, Any]] | None = None  # yt-dlp's extraction of a video
    refresh_days: int = 0  # YOUTUBE_REFRESH_DAYS (0: view counts are never read again)
    complete = True
    domains: ClassVar[tuple[Domain, ...]] = (PROSE,)  # videos are prose: the notes collection
    deletion_cause: ClassVar[str] = PLAYLIST_REMOVED
    local_listing: ClassVar[bool] = False  # the API's quota: listed in its own turn only
    # {source: view count} read again by the last listing, for ingest to set on stored points
    refreshed: dict[str, int | None] = field(default_factory=dict, repr=False)
    # ids whose view counts this run read again, shared by the run's playlists: a video in two
    # playlists is refreshed once, and both playlists' points get the new count
    fresh: set[str] = field(default_factory=set, repr=False)
    _caption_problems: dict[str, str] = field(default_factory=dict, repr=False)
    _listed: set[str] = field(default_factory=set, repr=False)
    _whole: bool = field(default=False, repr=False)  # the last listing reached the end
    _details: Details | None = field(default=None, repr=False)  # what `read` reads

    @property
    def origin(self) -> str:
        return f"{PREFIX}/{self.playlist}"

    def name(self, video_id: str) -> str:
        return f"{self.origin}/{video_id}"

    def listing(self, *, everything: bool) -> Listing:
        listing = Listing()
        self._listed, self._whole = set(), False
        if self.problem or self.api is None:
            listing.failed.append(Failure(self.origin, self.problem or "no API client"))
            return listing
        details = Details(self.root / DETAILS_NAME)
        entries: list[Entry] = []
        try:
            self._entries(entries)
            self._whole = True
        except QuotaReached as exc:
            log.warning("%s: %s", self.origin, exc)
            listing.skipped[UNLISTED] = 1  # how many videos its rest holds is not known
        except (KbError, OSError) as exc:
            listing.failed.append(Failure(self.origin, f"not listed to its end: {exc}"))
        self._listed = {self.name(e.id) for e in entries}
        missing = [e.id for e in dict.fromkeys(entries) if e.id not in details.videos]
        unavailable = {e.id for e in entries if e.private}
        fetch = [v for v in dict.fromkeys(missing) if v not in unavailable]
        gone = len([v for v in dict.fromkeys(missing) if v in unavailable])
        done = 0
        now = self.api.ledger.now().isoformat(timespec="seconds")
        try:
            for i in range(0, len(fetch), PAGE):
                asked = fetch[i : i + PAGE]
                found = [replace(v, fetched=now) for v in self.api.videos(asked)]
                details.add(found)
                done += len(asked)
                gone += len(set(asked) - {v.id for v in found})
        except QuotaReached as exc:
            log.warning("%s: %s", self.origin, exc)
            listing.skipped[WAITING] = listing.skipped.get(WAITING, 0) + len(fetch) - done
        except (KbError, OSError) as exc:
            listing.failed.append(
                Failure(self.origin, f"{len(fetch) - done} videos not fetched: {exc}")
            )
        if gone:
            listing.skipped[UNAVAILABLE] = gone
            log.info("%s: %d deleted or private videos skipped", self.origin, gone)
        held = [v for v in dict.fromkeys(e.id for e in entries) if v in details.videos]
        self._refresh(held, details, listing)
        self._fetch_captions(held, details, listing)
        for video_id in held:
            source = self.name(video_id)
            listing.items.append(Item(source, details.path, source, pending=False))
        self._details = details
        return listing

    def _refresh(self, held: list[str], details: Details, listing: Listing) -> None:
        """View counts older than refresh_days read again, 50 a unit, into `refreshed`."""
        self.refreshed = {}
        if not self.refresh_days or self.api is None:
            return
        now = self.api.ledger.now()
        due_before = (now - timedelta(days=self.refresh_days)).isoformat(timespec="seconds")
        due = [v for v in held if (details.videos[v].fetched or "") <= due_before]
        if listing.failed or WAITING in listing.skipped:
            due = []  # the API already failed or ran out this run: it waits for the next one
        done = 0
        try:
            for i in range(0, len(due), PAGE):
                counts = self.api.statistics(due[i : i + PAGE])
                fresh = [replace(details.videos[v], view_count=count,
                                 fetched=now.isoformat(timespec="seconds"))
                         for v, count in counts.items() if v in details.videos]  # fmt: skip
                details.add(fresh)
                self.fresh.update(v.id for v in fresh)
                done += len(due[i : i + PAGE])
        except (KbError, OSError) as exc:  # QuotaReached too: the rest waits, nothing fails
            log.warning("%s: view counts not refreshed: %s", self.origin, exc)
            listing.skipped[STALE] = len(due) - done
        self.refreshed = {self.name(v): details.videos[v].view_count for v in held
                          if v in self.fresh}  # fmt: skip
        if self.refreshed:
            log.info("%s: %d view counts refreshed", self.origin, len(self.refreshed))

    def _fetch_captions(self, held: list[str], details: Details, listing: Listing) -> None:
        """Captions of the videos that have none kept yet (kb.sources.youtube.captions); a failure
        is noted on
        the video (its note is stored without them) and the next run tries again."""
        self._caption_problems = {}
        if self.captions is None or self.video_info is None:
            return
        todo = [v for v in held if self.captions.get(v) is None]
        fetched = 0
        for video_id in todo:
            try:
                self.captions.fetch(
                    video_id, self.video_info(video_id), details.videos[video_id].language
                )
                fetched += 1
            except ConfigError as exc:  # no yt-dlp: the playlist says so once
                listing.failed.append(Failure(self.origin, f"captions not fetched: {exc}"))
                break
            except (CaptionError, OSError) as exc:
                self._caption_problems[video_id] = (
                    f"captions not fetched ({exc}); tried again next run"
                )
        if todo:
            log.info("%s: captions of %d videos fetched, %d failed (next run)", self.origin,
                     fetched, len(self._caption_problems))  # fmt: skip

    def _entries(self, into: list[Entry]) -> None:
        if self.playlist == watch_later.WATCH_LATER:
            if self.extract is None:
                raise ConfigError("Watch Later needs yt-dlp (no extractor)")
            into.extend(watch_later.entries(self.extract(watch_later.WATCH_LATER_URL)))
            return
        assert self.api is not None
        for page in self.api.playlist(self.playlist):
            into.extend(page)

    def read(self, item: Item, *, max_bytes: int) -> Note:
        assert self._details is not None, "read before listing"
        video_id = item.source.rsplit("/", 1)[-1]
        stored = self.captions.get(video_id) if self.captions is not None else None
        notice = self._caption_problems.get(video_id)
        return video_note(item.source, item.path, self._details.videos[video_id], stored, notice)

    def holds(self, source: str) -> bool:
        """A playlist not listed to its end (quota, failure) holds every video it held."""
        return not self._whole or source in self._listed

    def after_store(self, items: Sequence[Item]) -> list[OSError | None]:
        return [None] * len(items)  # nothing to do: the playlist is only ever read

    def finish(self) -> None:
        pass

    def refreshed_fields(self) -> dict[str, dict[str, object]]:
        """The view counts the last listing read again (`refreshed`), by video."""
        return {name: {VIEW_COUNT: count} for name, count in self.refreshed.items()}

    def too_many_gone(self, gone: int, live: int) -> str:
        return (
            f"YOUTUBE_PLAYLISTS {self.playlist}: {gone} of its {live} videos are gone from the "
            "playlist (emptied or replaced on YouTube? cookies of another account?)"
        )


def parse(value: str) -> list[str]:
    """YOUTUBE_PLAYLISTS as playlist ids, in order, without repeats."""
    ids = [p.strip() for p in value.split(",") if p.strip()]
    for playlist in ids:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", playlist):
            raise ConfigError(f"YOUTUBE_PLAYLISTS: {playlist!r} is not a playlist id (PL..., WL)")
    return list(dict.fromkeys(ids))


NO_KEY = (
    "YOUTUBE_API_KEY is not set: the YouTube Data API gives the videos' details "
    "(see docs/guide/youtube.md)"
)


def configured(
    config: YoutubeConfig,
    state: State,
    *,
    ledger: Ledger | None = None,
    video_info: Callable[[str], dict[str, Any]] | None = None,
    **api_options: Any,
) -> list[PlaylistSource]:
    """The playlists of `config` as sources. A missing key or cookies is no ConfigError: that
    playlist fails, naming the setting, and the notes still sync. `video_info` replaces
    yt-dlp's extraction of one video (a test replays recorded ones); `api_options` go to
    YoutubeApi (a test's backoff)."""
    playlists = parse(config.playlists)
    if not playlists:
        return []
    root = state.youtube_dir()
    ledger = ledger or Ledger(root / "quota.json", config.daily_units)
    api = None
    problem = None
    if config.api_key:
        api = YoutubeApi(config.api_url, config.api_key, ledger, **api_options)
    else:
        problem = NO_KEY
    kept = None
    if config.captions:
        preferred = [p.strip() for p in config.captions_languages.split(",")]
        http = httpx.Client(timeout=30.0, follow_redirects=True)
        kept = Captions(root / CAPTIONS_DIR, http, preferred)
        if video_info is None:
            opts = captions.options(config.cookies_file, config.cookies_browser)

            def video_info(video_id: str, opts: dict[str, Any] = opts) -> dict[str, Any]:
                return captions.video_info(video_id, opts)

    fresh: set[str] = set()  # view counts refreshed this run, by video id
    sources = []
    for playlist in playlists:
        extract = None
        reason = problem
        if playlist == watch_later.WATCH_LATER:
            try:
                opts = watch_later.options(config.cookies_file, config.cookies_browser)
            except ConfigError as exc:
                reason = str(exc)
            else:

                def extract(url: str, opts: dict[str, Any] = opts) -> dict[str, Any]:
                    return watch_later.flat_playlist(url, opts)

        sources.append(PlaylistSource(playlist, root, api, reason, extract, kept, video_info,
                                      config.refresh_days, fresh=fresh))  # fmt: skip
    return sources


def close(sources: Sequence[PlaylistSource]) -> None:
    for api in {id(s.api): s.api for s in sources if s.api is not None}.values():
        api.close()
    for kept in {id(s.captions): s.captions for s in sources if s.captions is not None}.values():
        kept.http.close()


def youtube_config(settings: Settings) -> YoutubeConfig:
    own = settings.of(YoutubeSettings)
    return YoutubeConfig(
        playlists=own.YOUTUBE_PLAYLISTS,
        api_url=own.YOUTUBE_API_URL,
        api_key=own.YOUTUBE_API_KEY,
        daily_units=own.YOUTUBE_DAILY_UNITS,
        cookies_file=own.YOUTUBE_COOKIES_FILE,
        cookies_browser=own.YOUTUBE_COOKIES_BROWSER,
        captions=own.YOUTUBE_CAPTIONS,
        captions_languages=own.YOUTUBE_CAPTIONS_LANGUAGES,
        refresh_days=own.YOUTUBE_REFRESH_DAYS,
    )


def playlists(
    settings: Settings,
    state: State,
    *,
    ledger: Ledger | None = None,
    video_info: Callable[[str], dict[str, Any]] | None = None,
    **api_options: Any,
) -> list[PlaylistSource]:
    """The YOUTUBE_PLAYLISTS playlists (`configured`); ConfigError when a folder or the inbox
    already names notes `youtube/...`, as the videos are named."""
    config = youtube_config(settings)
    if not parse(config.playlists):
        return []
    names = {name for name, _ in folder_names(settings.NOTE_FOLDERS)}
    if PREFIX in names or (settings.NOTES_DIR / PREFIX).exists():
        raise ConfigError(
            f"YOUTUBE_PLAYLISTS: videos are named {PREFIX}/..., and a NOTE_FOLDERS folder "
            f"or {settings.NOTES_DIR / PREFIX} already uses that name: rename it"
        )
    return configured(config, state, ledger=ledger, video_info=video_info, **api_options)
