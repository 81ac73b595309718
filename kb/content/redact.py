"""Credentials taken out of what is embedded and stored; the note files are never touched.

The patterns are detect-secrets' (Yelp's maintained detector, pinned): its provider plugins
(AWS, Azure, GitHub, GitLab, Slack, Stripe, OpenAI, npm, PyPI, JWT ...), its basic-auth plugin
(passwords in `scheme://user:password@host` connection strings), its private-key headers, and its
keyword rules for configuration values (`password: ...`, `api_key = ...`, `secret: ...`).
detect-secrets reports a secret's value for a line of code; notes need the span to replace, whole
private-key blocks and tokens that do not stop at a lazy regex's end, so this module runs the
plugins' own regexes and works out the spans. Its high-entropy plugins are left out: in prose they
flag every word and every commit hash. docs/guide/security.md says what is and is not caught.

A secret becomes `[redacted <kind>]`; the count per note is distinct secrets, never their text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from detect_secrets.plugins import keyword
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from kb.content.chunking import Chunk
from kb.content.notes import Note
from kb.core.invisible import hidden_spans, strip_invisible


def _secret_group(rx: re.Pattern[str]) -> int:
    """AWS's secret-key rule captures the key after its name; the others' groups are prefixes."""
    return 1 if rx.groups and rx.pattern.startswith("aws") else 0


# Any: detect-secrets types its class attributes (secret_type, denylist) as properties
_TOKEN_PLUGINS: tuple[Any, ...] = (
    AWSKeyDetector, AzureStorageKeyDetector, ArtifactoryDetector, DiscordBotTokenDetector,
    GitHubTokenDetector, GitLabTokenDetector, JwtTokenDetector, MailchimpDetector, NpmDetector,
    OpenAIDetector, PypiTokenDetector, SendGridDetector, SlackDetector, SquareOAuthDetector,
    StripeDetector, TelegramBotTokenDetector, TwilioKeyDetector,
)  # fmt: skip
# (kind, regex, group holding the secret; 0: the whole match). Token patterns never span lines:
# they run over the whole text (re.M for the anchored ones), in one pass each.
_BASIC_AUTH: Any = BasicAuthDetector
_TOKEN_RULES: list[tuple[str, re.Pattern[str], int]] = [
    *(
        (p.secret_type, re.compile(rx.pattern, rx.flags | re.M), _secret_group(rx))
        for p in _TOKEN_PLUGINS
        for rx in p.denylist
    ),
    *((_BASIC_AUTH.secret_type, rx, 1) for rx in _BASIC_AUTH.denylist),
]
# Configuration values (the YAML/INI/TOML forms, then the quoted forms of code): their `\s*` and
# `[^\v]` cross newlines, so they run line by line, on the lines that hold a keyword only.
_KEYWORD_RULES: list[tuple[str, re.Pattern[str], int]] = [
    ("secret", rx, group)
    for table in (
        keyword.CONFIG_DENYLIST_REGEX_TO_GROUP,
        keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
    )
    for rx, group in table.items()
]
_KEYWORD_HINT = re.compile("|".join(keyword.DENYLIST), re.I)
# detect-secrets finds a private key by its header line; the block runs to its END line (or to
# the end of the text when a chunk boundary cut it), and a chunk may start inside one.
_KEY_NAMES = "|".join(
    re.escape(rx.pattern.removeprefix("BEGIN ")) for rx in PrivateKeyDetector.denylist
)
_KEY_BLOCK = re.compile(
    rf"-----BEGIN (?:{_KEY_NAMES})-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)"
    rf"|{PrivateKeyDetector.denylist[-1].pattern}.*?(?:Private-MAC: \S+|\Z)"
    r"|\A[A-Za-z0-9+/=\s]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
    re.S,
)
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-+/=.]*")  # lazy token regexes stop early: run to its end


@dataclass(frozen=True)
class Redacted:
    """A note's chunks and context fields as they will be embedded and stored."""

    note: Note
    chunks: list[Chunk]
    title: str
    secrets: int  # distinct secrets found in this note


def _spans(text: str) -> Iterator[tuple[int, int, str, str]]:
    """(start, end, kind, secret) of every secret in `text`, overlapping spans included."""
    for m in _KEY_BLOCK.finditer(text):
        yield m.start(), m.end(), "private key", m.group(0)
    for kind, rx, group in _TOKEN_RULES:
        yield from _matches(text, 0, kind, rx, group)
    offset = 0
    for full in text.splitlines(keepends=True):
        line = full.rstrip("\r\n")
        if _KEYWORD_HINT.search(line):
            for kind, rx, group in _KEYWORD_RULES:
                yield from _matches(line, offset, kind, rx, group)
        offset += len(full)


def _matches(
    text: str, offset: int, kind: str, rx: re.Pattern[str], group: int
) -> Iterator[tuple[int, int, str, str]]:
    for m in rx.finditer(text):
        start, end = m.span(group)
        if group == 0:
            end = _TOKEN_TAIL.match(text, end).end()  # type: ignore[union-attr]
        if end - start >= 4:  # `pwd: x` in a sentence is not worth a marker
            yield offset + start, offset + end, kind, text[start:end]


def redact_text(text: str, found: set[str] | None = None, *, keep_lines: bool = False) -> str:
    """`text` with every secret replaced by `[redacted <kind>]`; the secrets are added to
    `found`. Secrets are looked for in the text as a reader sees it (kb.core.invisible: a
    zero-width
    character inside a key does not hide it). `keep_lines`: a marker keeps the line breaks of
    what it replaces (a key block), so the lines after it keep their numbers."""
    hidden = hidden_spans(text)
    seen = strip_invisible(text)[0] if hidden else text
    merged: list[list[Any]] = []  # [start, end, kind] in `seen`, overlapping spans joined
    for start, end, kind, secret in sorted(_spans(seen)):
        if found is not None:
            found.add(secret)
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, kind])
    if not merged:
        return text
    at = _offsets(len(text), hidden)
    out, cursor = [], 0
    for start, end, kind in merged:
        start, end = at(start), at(end - 1) + 1  # into `text`
        breaks = "\n" * text.count("\n", start, end) if keep_lines else ""
        out += [text[cursor:start], f"[redacted {kind.lower()}]", breaks]
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def _offsets(size: int, hidden: list[tuple[int, int]]) -> Callable[[int], int]:
    """Maps an offset in the text without its hidden characters to one in the text itself."""
    if not hidden:
        return lambda offset: offset
    gone = {i for start, end in hidden for i in range(start, end)}
    kept = [i for i in range(size) if i not in gone]
    return kept.__getitem__


def redact_note(note: Note, chunks: list[Chunk], title: str) -> Redacted:
    """The chunks' text and heading paths, the title and the topic, secrets replaced. Locators
    (offsets, lines) still point at the file, which keeps the secret."""
    found: set[str] = set()
    clean = [
        replace(
            c,
            text=redact_text(c.text, found),
            heading_path=tuple(redact_text(h, found) for h in c.heading_path),
        )
        for c in chunks
    ]
    topic = redact_text(note.topic, found) if note.topic else note.topic
    return Redacted(replace(note, topic=topic), clean, redact_text(title, found), len(found))
