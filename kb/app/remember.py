"""What the assistant is asked to remember, and syncs it may start: the MCP write tools
save_note, save_url and sync (and `ingest.py --save-url`).

`save_note` writes a Markdown note (frontmatter with its tags, `# title`, the text) into the inbox
NOTES_DIR, `save_url` a fetched web page as one (kb.sources.web.page.saved_note: `kind: web`
with its url, site, author, published and fetched dates) under `web/<site>/`. The file is the
user's note from then on: a new file, never written over (a name taken in the inbox or in
ingested/ gets `-2`, `-3`...), as open as the folder it is written to (not our owner-only state),
made durable (fsync) before it is indexed. Then that note alone is ingested (kb.sources.picked),
under the ingest lock taken before anything is written: while another sync runs nothing is
written and the caller is told so; the answer names the file where it now is (ingested/...).

`sync` runs the sync `ingest.py` runs (every source, or one: the inbox, a NOTE_FOLDERS name,
`youtube`, `web`), under the same lock.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import yaml

from kb.app.ingest import ingest_config, run
from kb.content.formats.base import FormatError
from kb.content.notes import normalise_tags
from kb.core.errors import ConfigError, IngestError, SaveError
from kb.core.schema import INBOX
from kb.core.settings import Settings
from kb.core.state import State
from kb.embedding.client import EmbedClient
from kb.ingest.options import IngestOptions
from kb.ingest.progress import Progress, Summary
from kb.ingest.run import ingest
from kb.sources import registry
from kb.sources.files import INGESTED
from kb.sources.folder import parse as folder_names
from kb.sources.inbox import InboxSource
from kb.sources.picked import Picked
from kb.sources.web.fetch import Fetcher, FetchError
from kb.sources.web.page import PREFIX, Page, host_of, read_page, saved_note
from kb.sources.web.source import web_limits
from kb.store.points import Store

log = logging.getLogger(__name__)

SLUG_CHARS = 60
MAX_TRIES = 1000
YOUTUBE = "youtube"  # sync(source="youtube"): every YOUTUBE_PLAYLISTS playlist
_NOT_WORD = re.compile(r"[^\w]+")


@dataclass(frozen=True)
class Saved:
    file: str  # where the note is now, relative to NOTES_DIR (ingested/... once stored)
    source: str  # its name in search results
    title: str
    passages: int  # chunks stored (0: private, not indexed)
    private: bool = False


def slug(title: str) -> str:
    """A file name from a title: words (any script) joined by `-`, at most SLUG_CHARS."""
    words = _NOT_WORD.sub("-", unicodedata.normalize("NFC", title).lower()).strip("-_")
    return words[:SLUG_CHARS].rstrip("-_") or "note"


def inbox_folder(settings: Settings, folder: str | None) -> PurePosixPath:
    """`folder` as a folder of the inbox, relative; SaveError for one that is not."""
    text = (folder or "").strip().replace("\\", "/").strip("/")
    path = PurePosixPath(text)
    parts = [p for p in path.parts if p]
    if not text:
        return PurePosixPath()
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise SaveError(f"folder {folder!r}: a folder name without control characters (NUL ...)")
    if any(p in (".", "..") or p.startswith(".") for p in parts) or text.startswith("~"):
        raise SaveError(f"folder {folder!r}: a folder inside the notes, without '..' or '.' names")
    reserved = {INGESTED, *(name for name, _ in folder_names(settings.NOTE_FOLDERS))}
    if parts[0] in reserved:
        raise SaveError(f"folder {folder!r}: {parts[0]} is not an inbox folder (reserved name)")
    return PurePosixPath(*parts)


def write_note(settings: Settings, folder: PurePosixPath, title: str, content: str) -> str:
    """Write `content` as a new note of the inbox under `folder`, named after `title`; the
    note's `source`. Never over another file: a name taken in the inbox or in ingested/ (where a
    stored note of that name would be replaced) gets a number. Call it holding the ingest lock."""
    root = settings.NOTES_DIR
    if not root.is_dir():
        raise SaveError(f"NOTES_DIR {root} is not a folder here: the note cannot be saved")
    base = slug(title)
    mode = stat.S_IMODE(root.stat().st_mode) & 0o666  # as open as the inbox: the user's file
    directory = open_folder(root, folder)
    try:
        for n in range(1, MAX_TRIES + 1):
            name = f"{base}.md" if n == 1 else f"{base}-{n}.md"
            source = (folder / name).as_posix()
            if os.path.lexists(root / INGESTED / source):
                continue
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                fd = os.open(name, flags, mode, dir_fd=directory)
            except FileExistsError:
                continue
            try:
                os.fchmod(fd, mode)  # whatever this process's umask (owner-only: kb.core.state)
                os.write(fd, content.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.fsync(directory)
            log.info("saved a note as %s", source)
            return source
    finally:
        os.close(directory)
    raise SaveError(f"{folder / base}.md and {MAX_TRIES - 1} numbered names are all taken")


def open_folder(root: Path, folder: PurePosixPath) -> int:
    """A descriptor of `folder` inside `root`, its missing parts made (each as open as the one
    above it, its entry synced), each part opened without following a link: a folder that is a
    link (`data/lnk -> /elsewhere`) or a file is refused, so a note is only ever written inside
    NOTES_DIR, whatever is swapped in meanwhile."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in folder.parts:
            made = False
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=fd)
                made = True
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise SaveError(
                    f"folder {folder}: {part} is a link or a file, not a folder of the inbox "
                    "(notes are saved only inside NOTES_DIR)"
                ) from None
            if made:  # the user's folder, not ours: as open as the one above it (kb.core.state)
                os.fchmod(inner, stat.S_IMODE(os.fstat(fd).st_mode))
                os.fsync(fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def note_text(title: str, text: str, tags: Sequence[str]) -> str:
    front = f"---\n{yaml.safe_dump({'tags': list(tags)}, allow_unicode=True)}---\n" if tags else ""
    return f"{front}# {' '.join(title.split())}\n\n{text.strip()}\n"


def ingest_saved(settings: Settings, client: EmbedClient, store: Store, source: str) -> Saved:
    """Ingest the inbox note `source` on its own (a new collection: the whole inbox); SaveError
    when it is not indexed (the note stays in the inbox for the next sync)."""
    reserved = [name for name, _ in folder_names(settings.NOTE_FOLDERS)]
    inbox = InboxSource(settings.NOTES_DIR, reserved=reserved, suffixes=settings.index_extensions)
    try:
        picked = Picked(inbox, {source})
        summary = ingest(picked, client, store, State(settings.STATE_DIR), ingest_config(settings))
    except IngestError as exc:
        raise SaveError(f"saved {source} in the inbox, but not indexed yet: {exc}") from exc
    file = f"{INGESTED}/{source}" if (settings.NOTES_DIR / INGESTED / source).exists() else source
    failed = [f.reason for f in summary.failed if f.source in (source, file)]
    if failed:
        raise SaveError(f"saved {file}, but it was not indexed: {failed[0]}")
    title = next((p["title"] for _, p in store.payloads(source)), source)
    if source in summary.private:
        return Saved(file, source, source, 0, private=True)
    if source not in summary.ingested:
        raise SaveError(f"saved {file}, but it was not indexed (is .md in INDEX_EXTENSIONS?)")
    return Saved(file, source, str(title), len(store.payloads(source)))


def save_note(
    settings: Settings,
    client: EmbedClient,
    store: Store,
    title: str,
    text: str,
    tags: Sequence[str] = (),
    folder: str | None = None,
) -> Saved:
    """A new inbox note from `title`, `text` and `tags` in `folder`, ingested (see the module
    docstring); IngestBusy while another sync runs (nothing written), SaveError otherwise."""
    if not title.strip() or not text.strip():
        raise SaveError("a note needs a title and a text")
    try:
        tags = normalise_tags(list(tags))
    except ValueError as exc:
        raise SaveError(f"tags: {exc}") from None
    where = inbox_folder(settings, folder)
    with State(settings.STATE_DIR).lock():
        source = write_note(settings, where, title, note_text(title, text, tags))
        return ingest_saved(settings, client, store, source)


def fetch_page(settings: Settings, url: str) -> Page:
    """The page at `url`, fetched within the WEB_* limits (never from a private address unless
    WEB_ALLOW_PRIVATE); SaveError saying why not."""
    with Fetcher(web_limits(settings)) as fetcher:
        try:
            got = fetcher.fetch(url.strip())
            assert not isinstance(got, str)
            return read_page(got, url.strip(), datetime.now(UTC).isoformat(timespec="seconds"))
        except FetchError as exc:
            raise SaveError(f"{url}: not saved: {exc}") from None
        except FormatError as exc:
            raise SaveError(f"{url}: not saved: {exc.reason}") from None


def url_note(page: Page, tags: Sequence[str], note: str | None) -> tuple[PurePosixPath, str, str]:
    """Where a fetched page goes in the inbox (`web/<site>`), its title and its file's text."""
    title = " ".join((page.title or page.link).split())
    host = re.sub(r"[^a-z0-9.-]+", "-", host_of(page.link)).strip(".-") or "site"
    return PurePosixPath(PREFIX, host), title, saved_note(page, list(tags), note)


def save_url(
    settings: Settings,
    client: EmbedClient,
    store: Store,
    url: str,
    tags: Sequence[str] = (),
    note: str | None = None,
) -> Saved:
    """The page at `url` fetched and saved as an inbox note, ingested (see the module
    docstring); SaveError naming why a page could not be saved."""
    try:
        tags = normalise_tags(list(tags))
    except ValueError as exc:
        raise SaveError(f"tags: {exc}") from None
    page = fetch_page(settings, url)
    with State(settings.STATE_DIR).lock():
        return ingest_saved(settings, client, store, write_page(settings, page, tags, note))


def write_page(
    settings: Settings, page: Page, tags: Sequence[str] = (), note: str | None = None
) -> str:
    """A fetched page written into the inbox as a note (not ingested yet): its `source`. Call
    it holding the ingest lock."""
    folder, title, content = url_note(page, normalise_tags(list(tags)), note)
    return write_note(settings, folder, title, content)


def source_names(settings: Settings) -> list[str]:
    """What `sync(source)` takes: the inbox, each NOTE_FOLDERS name, each other kind configured
    (youtube, web, mail ...: its items' first name)."""
    names = [INBOX, *(name for name, _ in folder_names(settings.NOTE_FOLDERS))]
    return names + list(dict.fromkeys(k.prefix for k, _ in registry.shown(settings) if k.prefix))


def sync(
    settings: Settings,
    client: EmbedClient,
    store: Store,
    source: str | None = None,
    progress: Progress | None = None,
) -> Summary:
    """The sync `ingest.py` runs, of every source or of `source` alone, under the ingest lock;
    IngestBusy while another runs, ConfigError for a source that is not configured."""
    if source is not None and source not in source_names(settings):
        raise ConfigError(
            f"no source {source!r} to sync: one of {', '.join(source_names(settings))}"
        )
    if source is None:
        options = IngestOptions(progress=progress)
    elif source == YOUTUBE:
        options = IngestOptions(youtube_only=True, progress=progress)
    else:
        options = IngestOptions(only=frozenset({source}), progress=progress)
    with State(settings.STATE_DIR).lock():
        return run(settings, client, store, options)
