"""Mailboxes as a source (MAIL): each message one item of kind `email`, named
`mail/<mailbox>/<message>`, with its subject, sender, recipients, date and thread.

MAIL names `.mbox` files (Gmail Takeout, Thunderbird's extensionless folder files, an Apple
Mail export's `mbox`), Maildir folders (`cur/`, `new/`), `.eml` files, or folders holding any of
them. Mailboxes are only ever read (Python's `mailbox` and `email` with `policy.default`), never
locked or written. A message is named by its Message-ID (hashed), so the same message keeps its
points when the mailbox is re-exported; one gone from its mailbox is soft-deleted, as a file
gone from its folder.

What is embedded of a message is what it adds: its own text, without the quoted replies
(`> ` lines and the `On ... wrote:` above them, an HTML `<blockquote>`, Gmail's quote) and the
signature after `-- `, so a thread's history is not embedded again in every reply. An HTML-only
body is read as the product reads a web page (kb.content.formats); an attachment in a format the
product reads (PDF, Word, HTML, CSV, text...) is searched with its message, under its own
heading. A message over NOTE_MAX_BYTES, or with more than MAX_PARTS parts, fails alone.
"""

from __future__ import annotations

import email
import email.parser
import hashlib
import mailbox
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from email.utils import getaddresses, parsedate_to_datetime
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from kb.content import formats
from kb.content.formats.base import Block, FormatError, decode_text
from kb.content.notes import Note, NoteError
from kb.core.kinds import IMAGES, PROSE, TEXT_NOTES, Domain, suffix_of
from kb.core.schema import EMAIL, MESSAGE_REMOVED, RECIPIENTS, SENDER, THREAD
from kb.core.schema import KIND as KIND_FIELD
from kb.core.settings import SOURCE, KindSettings, Settings
from kb.core.state import State
from kb.sources.base import Failure, Item, Listing, Source, SourceDefaults
from kb.sources.folder import claim_prefix
from kb.sources.kind import Kind, Payload, existing_paths

PREFIX = "mail"  # first component of every message's `source`
MAX_PARTS = 200  # MIME parts walked per message: a hostile one fails alone, quickly
HEAD_BYTES = 64 * 1024  # what a listing reads of a message: its headers
ATTACHMENT_CHARS = 2000  # chunk size given to an attachment's reader (tables, code)
_QUOTE_LEAD = re.compile(r"^(On .{0,300}wrote:|Le .{0,300}a écrit\s?:|Am .{0,300}schrieb .*:)\s*$")


@dataclass(frozen=True)
class Place:
    """Where one message is: its mailbox file or folder, and its key in it."""

    box: str  # "mbox", "maildir" or "eml"
    path: Path
    key: str


@dataclass
class MailSource(SourceDefaults):
    """The MAIL mailboxes (see the module docstring)."""

    paths: list[Path]
    origin = PREFIX
    complete = True
    domains: ClassVar[tuple[Domain, ...]] = (PROSE,)
    deletion_cause = MESSAGE_REMOVED
    _places: dict[str, Place] = field(default_factory=dict, repr=False)
    _boxes: dict[Path, mailbox.Mailbox[Any]] = field(default_factory=dict, repr=False)

    @property
    def root(self) -> Path:
        return self.paths[0].parent

    def listing(self, *, everything: bool) -> Listing:
        listing = Listing()
        self._places = {}
        for top in self.paths:
            for where, name in _mailboxes(top):
                for key in self._keys(where, listing, name):
                    try:
                        head = self._head(where, key)
                        source = f"{PREFIX}/{name}/{_message_name(head, where, key)}"
                    except (OSError, ValueError, LookupError) as exc:
                        listing.failed.append(Failure(f"{PREFIX}/{name}/{key}", str(exc)))
                        continue
                    if source in self._places:  # the same message twice: read once
                        listing.skipped["duplicate message"] = (
                            listing.skipped.get("duplicate message", 0) + 1
                        )
                        continue
                    self._places[source] = Place(where[0], where[1], key)
                    listing.items.append(
                        Item(source, where[1], source, pending=False, own_file=where[0] == "eml")
                    )
        return listing

    def read(self, item: Item, *, max_bytes: int) -> Note:
        place = self._places[item.source]
        data = self._bytes(place, max_bytes + 1)
        if len(data) > max_bytes:
            raise NoteError(item.source, f"message over {max_bytes} bytes (NOTE_MAX_BYTES)")
        message = email.message_from_bytes(data, policy=policy.default)
        assert isinstance(message, EmailMessage)
        return message_note(item.source, item.path, message)

    def holds(self, source: str) -> bool:
        return source in self._places

    def after_store(self, items: Sequence[Item]) -> list[OSError | None]:
        return [None] * len(items)  # read only: nothing is done to a mailbox

    def finish(self) -> None:
        for box in self._boxes.values():
            box.close()
        self._boxes.clear()

    def too_many_gone(self, gone: int, live: int) -> str:
        return (
            f"MAIL: {gone} of its {live} messages are gone from the mailboxes (a mailbox "
            "moved, or an export replaced by a smaller one?)"
        )

    # --- reading a mailbox -----------------------------------------------------------------

    def _keys(self, where: tuple[str, Path], listing: Listing, name: str) -> list[str]:
        box, path = where
        if box == "eml":
            return [path.name]
        try:
            opened = self._box(where)
            return sorted(opened.keys(), key=str)
        except (OSError, mailbox.Error) as exc:
            listing.failed.append(Failure(f"{PREFIX}/{name}", f"cannot read the mailbox ({exc})"))
            return []

    def _box(self, where: tuple[str, Path]) -> mailbox.Mailbox[Any]:
        box, path = where
        if path not in self._boxes:
            if box == "mbox":
                self._boxes[path] = mailbox.mbox(path, create=False)
            else:
                self._boxes[path] = mailbox.Maildir(path, factory=None, create=False)
        return self._boxes[path]

    def _bytes(self, place: Place, limit: int) -> bytes:
        if place.box == "eml":
            with place.path.open("rb") as handle:
                return handle.read(limit)
        part = self._box((place.box, place.path)).get_file(place.key)
        try:
            return bytes(part.read(limit))
        finally:
            part.close()

    def _head(self, where: tuple[str, Path], key: str) -> EmailMessage:
        data = self._bytes(Place(where[0], where[1], key), HEAD_BYTES)
        head = email.parser.BytesHeaderParser(policy=policy.default).parsebytes(data)
        assert isinstance(head, EmailMessage)
        return head


def _mailboxes(top: Path) -> Iterator[tuple[tuple[str, Path], str]]:
    """((kind of mailbox, path), its name in the items' sources) for each mailbox under `top`
    (links are not followed)."""
    if top.is_file():
        yield ((_file_kind(top) or "mbox", top), top.name)
        return
    if _is_maildir(top):
        yield (("maildir", top), top.name)
        return
    for folder, dirs, files in os.walk(top):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for sub in list(dirs):
            if _is_maildir(here / sub):
                dirs.remove(sub)
                yield (("maildir", here / sub), (here / sub).relative_to(top.parent).as_posix())
        for name in sorted(files):
            path = here / name
            kind = _file_kind(path)
            if kind and not name.startswith(".") and not path.is_symlink():
                yield ((kind, path), path.relative_to(top.parent).as_posix())


def _is_maildir(path: Path) -> bool:
    return (path / "cur").is_dir() and (path / "new").is_dir()


def _file_kind(path: Path) -> str | None:
    if path.suffix.lower() == ".eml":
        return "eml"
    if path.suffix.lower() == ".mbox" or path.name == "mbox":
        return "mbox"
    return None


def _message_name(head: EmailMessage, where: tuple[str, Path], key: str) -> str:
    """A message's stable name: its Message-ID's hash, else (none) its mailbox key's."""
    message_id = _ids(str(head.get("message-id") or ""))
    basis = message_id[0] if message_id else f"{where[1].name}/{key}"
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def _ids(value: str) -> list[str]:
    return [m.lower() for m in re.findall(r"<([^<>\s]+)>", value)]


def _addresses(*values: object) -> list[str]:
    found = getaddresses([str(v) for v in values if v])
    return list(dict.fromkeys(address.lower() for _, address in found if "@" in address))


def message_note(source: str, path: Path, message: EmailMessage) -> Note:
    """A message as a note: `# subject`, a line of who and when, its own text (quotes and
    signature left out), then each readable attachment, a block located by its name."""
    subject = " ".join(str(message.get("subject") or "").split()) or "(no subject)"
    sender = _addresses(message.get("from"))
    recipients = _addresses(message.get("to"), message.get("cc"))
    date = None
    try:
        when = parsedate_to_datetime(str(message.get("date") or ""))
        date = when.isoformat() if when else None
    except (TypeError, ValueError):
        pass
    own = _ids(str(message.get("message-id") or ""))
    chain = _ids(str(message.get("references") or "")) or _ids(
        str(message.get("in-reply-to") or "")
    )
    thread = str(message.get("x-gm-thrid") or "") or next(iter(chain or own), None)
    parts = list(_parts(message))
    body = _body(message, parts)
    text = "\n".join([f"# {subject}", "", _who(message), "", body.strip()]).rstrip() + "\n"
    tail = []
    for name, content in _attachments(parts):  # each apart, located by its name
        begin = len(text) + 1
        text += f"\n{content.strip()}\n"
        tail.append(Block(begin, len(text) - 1, name, (name,)))
    record: dict[str, Any] = {
        KIND_FIELD: EMAIL,
        SENDER: sender[0] if sender else None,
        RECIPIENTS: recipients,
        THREAD: thread,
    }
    topic = f"Email from {sender[0]}" if sender else "Email"
    return Note(path, source, text, 0, (), topic, date, record=record, tail=tuple(tail))


def _who(message: EmailMessage) -> str:
    shown = []
    for header in ("from", "to", "cc", "date"):
        value = " ".join(str(message.get(header) or "").split())
        if value:
            shown.append(f"{header.capitalize()}: {value[:500]}")
    return "  \n".join(shown)


def _parts(message: EmailMessage) -> Iterator[EmailMessage]:
    for count, part in enumerate(message.walk()):
        if count >= MAX_PARTS:
            raise NoteError(str(message.get("message-id")), f"over {MAX_PARTS} MIME parts")
        if isinstance(part, EmailMessage) and not part.is_multipart():
            yield part


def _body(message: EmailMessage, parts: list[EmailMessage]) -> str:
    chosen = message.get_body(preferencelist=("plain", "html"))
    if not isinstance(chosen, EmailMessage):
        return ""
    content = _content(chosen)
    if chosen.get_content_subtype() == "html":
        return _html_text(content)
    return own_text(content)


def _content(part: EmailMessage) -> str:
    try:
        value = part.get_content()
    except (LookupError, ValueError, AssertionError):  # an unknown charset, a broken encoding
        payload = part.get_payload(decode=True)
        return decode_text(payload) if isinstance(payload, bytes) else ""
    return value if isinstance(value, str) else decode_text(value)


def _html_text(html: str) -> str:
    """An HTML body as the product reads a page, its quoted history and signature left out."""
    from bs4 import BeautifulSoup  # imported here: finding the kinds loads no HTML parser

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.select("blockquote, .gmail_quote, .gmail_signature, #appendonsend"):
        tag.decompose()
    try:
        return own_text(formats.parse("body.html", str(soup).encode(), ATTACHMENT_CHARS).text)
    except FormatError:
        return ""


def own_text(text: str) -> str:
    """A body without what it quotes (`> ` lines, the `On ... wrote:` line above them) and
    without the signature after the `-- ` line."""
    lines = text.replace("\r\n", "\n").split("\n")
    kept: list[str] = []
    for line in lines:
        if line.rstrip() == "--":  # RFC 3676's signature separator, "-- "
            break
        if line.lstrip().startswith(">"):
            while kept and (not kept[-1].strip() or _QUOTE_LEAD.match(kept[-1].strip())):
                if _QUOTE_LEAD.match(kept.pop().strip()):
                    break
            continue
        kept.append(line)
    return "\n".join(kept).strip()


def _attachments(parts: list[EmailMessage]) -> Iterator[tuple[str, str]]:
    """(heading, text) of each attachment in a format the product reads."""
    for part in parts:
        name = part.get_filename()
        if not name or part.get_content_disposition() not in ("attachment", "inline"):
            continue
        name = " ".join(name.split())[:200]
        suffix = suffix_of(name)
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes) or not data or suffix in IMAGES:
            continue  # images (logos, signatures) are not read by OCR here (docs/guide/ocr.md)
        try:
            if suffix in TEXT_NOTES:
                text = decode_text(data)
            else:
                text = formats.parse(name, data, ATTACHMENT_CHARS).text
        except FormatError:
            continue  # a format the product does not read, or a broken one: the message stays
        if text.strip():
            yield f"Attachment: {name}", text


class MailSettings(KindSettings):
    """MAIL (docs/guide/mail.md)."""

    MAIL: str = Field(
        "",
        description="Comma-separated mailboxes synced as a source (each message one item, "
        "results under mail/): .mbox files (Gmail Takeout, Thunderbird, Apple Mail), Maildir "
        "folders, .eml files or folders of them.",
        json_schema_extra=SOURCE,
    )


def mail_sources(settings: Settings) -> list[MailSource]:
    """The MAIL source (none when MAIL is empty); ConfigError naming the entry for one that is
    missing, or when a NOTE_FOLDERS folder is named `mail` (its notes' names would clash)."""
    paths = existing_paths("MAIL", settings.of(MailSettings).MAIL)
    if not paths:
        return []
    claim_prefix("MAIL", PREFIX, "messages", settings.NOTE_FOLDERS)
    return [MailSource(paths)]


class Mail(Kind):
    """The MAIL mailboxes: each message an item of kind `email`, read back from what the index
    stored (its own text, as search found it)."""

    name = PREFIX
    setting = "MAIL"
    settings_model = MailSettings
    order = 4
    prefix = PREFIX
    fields = (SENDER, RECIPIENTS, THREAD)
    unseen = (
        "no message of the MAIL mailboxes is named so (a message is named by its mailbox and a "
        "hash of its Message-ID: search_notes with kind email gives its name)"
    )

    def build(self, settings: Settings, state: State) -> list[Source]:
        return list(mail_sources(settings))

    def owns(self, payload: Payload) -> bool:
        return payload.get(KIND_FIELD) == EMAIL


KIND = Mail()
