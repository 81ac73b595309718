"""A source's items read and chunked, with the points each note would get: what ingest embeds
and writes, and what kb.ingest.plan compares with the collection.

A private note (`private: true` in its frontmatter, or a tag listed in PRIVATE_TAGS) is read
but never chunked, embedded or stored: it is set apart, and whatever the collection still
holds of it is deleted by kb.ingest.run. So is what is stored of a note whose `private` field is
not a boolean (it fails with the reason: it may well be meant as private).

Credentials in a note (keys, tokens, passwords) are replaced in what is embedded and stored
(kb.content.redact); the summary counts them per note, and the file keeps them.

Each note's links (kb.content.obsidian) are resolved against the notes of its own source once all
are read: a folder's listing names every note it holds; the inbox's run adds the notes stored from
it before (`known`). A note's `links` are the sources of the indexed notes it names, its
`unresolved_links` what its links to notes that are not indexed name (redacted like its text);
a private note is no link target. A note whose links resolve differently now (the note it names
came or went) gets new points, its vectors from the cache.

Frontmatter that is not valid YAML stops an inbox run before anything is written (its notes
would move into ingested/ otherwise). In a NOTE_FOLDERS folder (often shared, synced, a git
repository) such a note fails by name with the line, like any unreadable note: what the index
holds of it stays (the folder still lists the file, so it is not gone), and the rest of the
folder syncs, private notes taken out of the index included.

Whatever else reading one item raises (a reader's bug) fails that item alone, by name, its
traceback logged: one hostile file never stops the sync of the others (kb.core.limits bounds
what a reader meets, and each failure's words).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from kb.content import formats, obsidian
from kb.content.chunking import Chunk, chunk_note, embedding_text, note_title
from kb.content.notes import (
    FrontmatterError,
    Note,
    NoteError,
    NoTextNote,
    PrivateFieldError,
    is_private,
)
from kb.content.redact import redact_note, redact_text
from kb.core.errors import IngestError, KbError
from kb.core.schema import INBOX, LANGUAGE, ChunkRecord, FileStat, fingerprint, folders_of, point_id
from kb.embedding.keywords import TOKENIZER_VERSION
from kb.embedding.languages import detect
from kb.ingest.progress import Progress, Summary
from kb.sources.base import Failure, Item, Source

log = logging.getLogger(__name__)


@dataclass
class Prepared:
    """A note read and chunked, with what its points would hold."""

    item: Item
    note: Note
    chunks: list[Chunk]
    origin: str = INBOX  # the source it came from (payload `origin`)
    clean_title: str | None = None  # the title with its secrets redacted (kb.content.redact)
    links: list[str] = field(default_factory=list)  # the indexed notes it links to (`link`)
    unresolved: list[str] = field(default_factory=list)  # its links to notes not indexed
    stat: FileStat | None = None  # the file as it was before it was read

    @cached_property
    def texts(self) -> list[str]:
        """What is embedded for each chunk: the chunk with its title, heading path and topic."""
        title = self.title
        return [embedding_text(c, self.note, title) for c in self.chunks]

    @cached_property
    def title(self) -> str:
        return self.clean_title if self.clean_title is not None else note_title(self.note)

    @cached_property
    def languages(self) -> list[str | None]:
        """Each chunk's language (kb.embedding.languages): the note's frontmatter `lang`, a
        video's, else detected from the text embedded; None for code (its identifiers are
        analysed as English)."""
        note = self.note
        if note.domain == formats.CODE:
            return [None] * len(self.chunks)
        given = note.language or (note.record or {}).get(LANGUAGE)
        return [given or detect(text) for text in self.texts]

    @cached_property
    def records(self) -> list[ChunkRecord]:
        note = self.note
        return [
            ChunkRecord(
                text=c.text,
                source=note.source,
                folders=folders_of(note.source),
                title=self.title,
                heading_path=list(c.heading_path),
                chunk_index=c.index,
                tags=list(note.tags),
                topic=note.topic,
                document_date=note.document_date,
                char_start=c.char_start,
                char_end=c.char_end,
                line_start=c.line_start,
                line_end=c.line_end,
                origin=self.origin,
                locator=c.locator,
                domain=note.domain,
                aliases=list(note.aliases),
                links=self.links,
                unresolved_links=self.unresolved,
                file_mtime_ns=self.stat.mtime_ns if self.stat else None,
                file_size=self.stat.size if self.stat else None,
                file_sha256=self.stat.sha256 if self.stat else None,
                **{**(note.record or {}), LANGUAGE: language},
            )
            for c, language in zip(self.chunks, self.languages, strict=True)
        ]

    def forget(self) -> None:
        """Drop the texts and records, made again when next asked for: a run holds every note it
        read until the note is written, and these would double what each holds meanwhile
        (kb.ingest.run keeps them only while the note's group is written)."""
        self.__dict__.pop("texts", None)
        self.__dict__.pop("records", None)

    def points(self, model: str, dimensions: int) -> dict[str, str]:
        """{point id: note fingerprint} of the points this note would get now."""
        ids = [point_id(self.note.source, c.index) for c in self.chunks]
        note_hash = fingerprint(
            model,
            dimensions,
            TOKENIZER_VERSION,
            list(zip(ids, self.texts, self.records, strict=True)),
        )
        return dict.fromkeys(ids, note_hash)


@dataclass
class Read:
    """What a run read: the notes to index, and what must never be in the index."""

    notes: list[Prepared] = field(default_factory=list)
    private: list[Item] = field(default_factory=list)  # private notes: handed over, not stored
    unindexed: list[str] = field(default_factory=list)  # names whose stored points must go
    listed: list[str] = field(default_factory=list)  # every item listed, read or not


def prepare(
    source: Source,
    full: bool,
    max_bytes: int,
    summary: Summary,
    progress: Progress,
    private_tags: Collection[str] = (),
    known: Mapping[str, Sequence[str]] | None = None,
) -> Read:
    """Read and chunk every listed note, setting private ones apart, and resolve their links
    (`known`: the notes stored from an incomplete source before, with their aliases); bad
    frontmatter stops the run of a source that `halts_on_bad_frontmatter` (the inbox:
    IngestError) and fails that note alone elsewhere."""
    listing = source.listing(everything=full)
    summary.ignored.extend(listing.ignored)
    for reason, count in listing.skipped.items():
        summary.skipped[reason] = summary.skipped.get(reason, 0) + count
    summary.skipped_paths.extend(listing.skipped_paths)
    failed = list(listing.failed)
    read = Read(listed=[item.source for item in listing.items])
    bad_yaml: list[str] = []
    for item in listing.items:
        # before reading: a change meanwhile reads as stale
        stat = FileStat.of(item.path) if item.own_file else None
        try:
            note = source.read(item, max_bytes=max_bytes)
            if is_private(note, private_tags):
                read.private.append(item)
                read.unindexed.append(item.source)
                continue
            chunks = chunk_note(note)
            if not chunks:
                raise NoteError(item.path, "no text to index")
        except FrontmatterError as exc:
            if source.halts_on_bad_frontmatter:
                bad_yaml.append(f"{item.shown}: {exc.reason}")
            else:
                failed.append(Failure(item.shown, exc.reason))
            continue
        except PrivateFieldError as exc:
            failed.append(Failure(item.shown, exc.reason))
            read.unindexed.append(item.source)
            continue
        except NoTextNote as exc:  # a photo without words: counted, not a failure
            summary.skipped[exc.reason] = summary.skipped.get(exc.reason, 0) + 1
            summary.skipped_paths.append((item.shown, exc.reason))
            continue
        except NoteError as exc:
            failed.append(Failure(item.shown, exc.reason))
            continue
        except OSError as exc:
            failed.append(Failure(item.shown, f"cannot read it ({exc.strerror})"))
            continue
        except KbError:
            raise  # the run's own errors (the embedder, a quota) still end the run
        except Exception as exc:
            log.exception("%s could not be read (a bug: please report it)", item.shown)
            failed.append(Failure(item.shown, f"could not be read ({type(exc).__name__}: {exc})"))
            continue
        if note.notice:
            summary.notices.append(Failure(item.shown, note.notice))
        clean = redact_note(note, chunks, note_title(note))
        if clean.secrets:
            summary.redacted[item.source] = clean.secrets
        read.notes.append(Prepared(item, clean.note, clean.chunks, source.origin, clean.title,
                                   stat=None if note.record else stat))  # fmt: skip
    for failure in failed:
        summary.failed.append(failure)
        progress.failed(failure)
    link(read, source.origin, known or {})
    summary.unresolved.update({p.note.source: p.unresolved for p in read.notes if p.unresolved})
    if bad_yaml:
        raise IngestError(
            "; ".join(bad_yaml) + "; nothing was ingested: fix the frontmatter and run again",
            summary,
        )
    return read


def link(read: Read, origin: str, known: Mapping[str, Sequence[str]]) -> None:
    """Resolve every read note's links among the notes of its source (kb.content.obsidian.Vault):
    those listed now (private ones left out), those `known` from before, with their aliases."""
    private = {item.source for item in read.private}
    names: dict[str, Sequence[str]] = {s: () for s in read.listed if s not in private}
    names.update({s: a for s, a in known.items() if s not in private})
    names.update({p.note.source: p.note.aliases for p in read.notes})
    vault = obsidian.Vault(names, prefix="" if origin == INBOX else f"{origin}/")
    for p in read.notes:
        if p.note.links:
            p.links, unresolved = obsidian.resolve_all(vault, p.note.links, p.note.source)
            p.unresolved = [redact_text(target) for target in unresolved]
