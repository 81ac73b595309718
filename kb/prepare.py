"""A source's items read and chunked, with the points each note would get: what ingest embeds
and writes, and what kb.sync compares with the collection.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from kb.chunking import Chunk, chunk_note, embedding_text, note_title
from kb.errors import IngestError
from kb.keywords import TOKENIZER_VERSION
from kb.notes import FrontmatterError, Note, NoteError
from kb.progress import Progress, Summary
from kb.schema import INBOX, ChunkRecord, fingerprint, folders_of, point_id
from kb.sources.base import Failure, Item, Source


@dataclass
class Prepared:
    """A note read and chunked, with what its points would hold."""

    item: Item
    note: Note
    chunks: list[Chunk]
    origin: str = INBOX  # the source it came from (payload `origin`)

    @cached_property
    def texts(self) -> list[str]:
        """What is embedded for each chunk: the chunk with its title, heading path and topic."""
        title = self.title
        return [embedding_text(c, self.note, title) for c in self.chunks]

    @cached_property
    def title(self) -> str:
        return note_title(self.note)

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
            )
            for c in self.chunks
        ]

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


def prepare(
    source: Source, full: bool, max_bytes: int, summary: Summary, progress: Progress
) -> list[Prepared]:
    """Read and chunk every listed note; stops the run on bad frontmatter."""
    listing = source.listing(everything=full)
    summary.ignored.extend(listing.ignored)
    for reason, count in listing.skipped.items():
        summary.skipped[reason] = summary.skipped.get(reason, 0) + count
    failed = list(listing.failed)
    prepared: list[Prepared] = []
    bad_yaml: list[str] = []
    for item in listing.items:
        try:
            note = source.read(item, max_bytes=max_bytes)
            chunks = chunk_note(note)
            if not chunks:
                raise NoteError(item.path, "no text to index")
        except FrontmatterError as exc:
            bad_yaml.append(f"{item.shown}: {exc.reason}")
            continue
        except NoteError as exc:
            failed.append(Failure(item.shown, exc.reason))
            continue
        except OSError as exc:
            failed.append(Failure(item.shown, f"cannot read it ({exc.strerror})"))
            continue
        prepared.append(Prepared(item, note, chunks, source.origin))
    for failure in failed:
        summary.failed.append(failure)
        progress.failed(failure)
    if bad_yaml:
        raise IngestError(
            "; ".join(bad_yaml) + "; nothing was ingested: fix the frontmatter and run again",
            summary,
        )
    return prepared
