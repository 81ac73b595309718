"""Credentials never reach the index: real MiniLM embedder, embedded Qdrant, real files. Each kind
is replaced in the stored text and payload and cannot be found by a keyword search; the note file
stays byte for byte; the summary counts secrets per note without printing them."""

from __future__ import annotations

from pathlib import Path

import pytest
from embedder_fixtures import IN_PROCESS_EMBED_URL
from ingest_fixtures import KIMCHI, make_settings, tree_state, write

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.content.redact import redact_text
from kb.core.invisible import strip_invisible
from kb.core.settings import Settings
from kb.ingest.progress import format_summary
from kb.search.query import search
from kb.store.points import Store

# (kind, the line in the note, the secret it holds): test values in each provider's format
SECRETS = [
    ("aws key id", "aws_access_key_id = AKIAQ3EGRT7ZCV5XWN2P", "AKIAQ3EGRT7ZCV5XWN2P"),
    (
        "aws secret",
        'aws_secret_access_key = "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"',
        "kq3VhT8pXz2LmN5rB7wY4cJ6dF9gH1sA0eU3iO8t",
    ),
    (
        "github token",
        "deploy token: ghp_R7tYq2LmX9vB4nK8wZ3cJ6dF1gH5sA0eU2iO",
        "ghp_R7tYq2LmX9vB4nK8wZ3cJ6dF1gH5sA0eU2iO",
    ),
    (
        "slack token",
        "bot xoxb-482910573826-5839201746352-QmZpR7tYq2LmX9vB4nK8wZ3c",
        "xoxb-482910573826-5839201746352-QmZpR7tYq2LmX9vB4nK8wZ3c",
    ),
    (
        "stripe key",
        "billing sk_live_51Hq2LmX9vB4nK8wZ3cJ6dF1g",
        "sk_live_51Hq2LmX9vB4nK8wZ3cJ6dF1g",
    ),
    (
        "jwt",
        "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.Qm9vZ2llV29vZ2llQm9vZ2llV29vZ2ll",
        "Qm9vZ2llV29vZ2llQm9vZ2llV29vZ2ll",
    ),
    ("password value", "password: plumtree-Quasar-88", "plumtree-Quasar-88"),
    ("api key value", "api_key = zorblatVexingMarmot42", "zorblatVexingMarmot42"),
    (
        "connection string",
        "DATABASE_URL=postgres://alice:Gl4cierMint0@db.home.lan:5432/money",
        "Gl4cierMint0",
    ),
]
KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
PRIVATE_KEY = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----"
SERVER_NOTE = (
    "# Home server\n\nHow I set up the backup box and its accounts.\n\n"
    + "\n".join(line for _, line, _ in SECRETS)
    + f"\n\nThe SSH key for the backup user:\n\n{PRIVATE_KEY}\n\nRestic runs nightly at 3am.\n"
)
EVERY_SECRET = [secret for _, _, secret in SECRETS] + [KEY_BODY]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path, IN_PROCESS_EMBED_URL)


@pytest.mark.parametrize(("kind", "line", "secret"), SECRETS, ids=[k for k, _, _ in SECRETS])
def test_each_kind_of_secret_is_replaced_by_a_marker(kind: str, line: str, secret: str) -> None:
    found: set[str] = set()
    clean = redact_text(f"before\n{line}\nafter", found)
    assert secret not in clean and "[redacted " in clean
    assert clean.startswith("before\n") and clean.endswith("\nafter")
    assert any(secret in f for f in found)


def test_a_private_key_block_is_replaced_whole_even_when_a_chunk_starts_inside_it() -> None:
    assert redact_text(f"key:\n{PRIVATE_KEY}\nnext") == "key:\n[redacted private key]\nnext"
    tail = f"{KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----\nnext"
    assert redact_text(tail) == "[redacted private key]\nnext"


def test_a_key_block_keeps_its_line_breaks_when_lines_must_stay_numbered() -> None:
    # read_note numbers the file's lines: what follows a redacted block keeps its number
    clean = redact_text(f"key:\n{PRIVATE_KEY}\nnext", keep_lines=True)
    assert clean == "key:\n[redacted private key]\n\n\nnext"
    assert clean.count("\n") == f"key:\n{PRIVATE_KEY}\nnext".count("\n")


@pytest.mark.parametrize(("kind", "line", "secret"), SECRETS, ids=[k for k, _, _ in SECRETS])
def test_an_invisible_character_inside_a_secret_does_not_hide_it(
    kind: str, line: str, secret: str
) -> None:
    # output strips invisible characters (kb.core.invisible): a secret split by one must not come
    # back whole in a result, so redaction reads the text as a reader sees it
    middle = len(secret) // 2
    split = line.replace(secret, f"{secret[:middle]}\u200b{secret[middle:]}")
    clean = redact_text(f"before\n{split}\nafter")
    assert strip_invisible(clean)[0] == redact_text(f"before\n{line}\nafter")


def test_prose_hashes_and_urls_are_left_alone() -> None:
    prose = (
        "Fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b, see https://example.com/a?b=c "
        "and mail me at me@example.com. The kimchi needs 2 tbsp gochugaru."
    )
    assert redact_text(prose) == prose


def test_secrets_are_not_stored_or_searchable_and_the_note_file_is_untouched(
    settings: Settings, client, store: Store
) -> None:
    inbox = settings.NOTES_DIR
    write(inbox / "server.md", SERVER_NOTE)
    write(inbox / "kimchi.md", KIMCHI)
    summary = run(settings, client, store)
    assert sorted(summary.added) == ["kimchi.md", "server.md"]
    assert summary.redacted == {"server.md": len(EVERY_SECRET)}

    stored = " ".join(str(payload) for _, payload in store.payloads())
    assert "[redacted " in stored and "Restic runs nightly" in stored
    for secret in EVERY_SECRET:
        assert secret not in stored, secret
        hits = search(store, client, secret, 5, mode="keyword")
        assert all(secret not in hit.text for hit in hits), secret
    assert search(store, client, "backup box accounts", 1)[0].source == "server.md"

    # the file moved into ingested/ byte for byte: the user's note keeps its secrets
    assert (inbox / "ingested" / "server.md").read_bytes() == SERVER_NOTE.encode()
    report = format_summary(summary)
    assert f"redacted {len(EVERY_SECRET)} secrets in 1 notes" in report
    assert f"server.md ({len(EVERY_SECRET)})" in report
    log = (settings.STATE_DIR / "runs.jsonl").read_text(encoding="utf-8")
    assert all(secret not in report and secret not in log for secret in EVERY_SECRET)


def test_a_folder_note_with_secrets_is_indexed_redacted_and_never_written(
    tmp_path: Path, embedder_transport
) -> None:
    vault = tmp_path / "vault"
    write(vault / "server.md", SERVER_NOTE)
    settings = make_settings(tmp_path, IN_PROCESS_EMBED_URL, NOTE_FOLDERS=f"vault={vault}")
    before = tree_state(vault)
    with (
        open_store(settings) as store,
        embed_client(settings, transport=embedder_transport) as client,
    ):
        first = run(settings, client, store)
        again = run(settings, client, store)
        stored = " ".join(str(p) for _, p in store.payloads())
    assert first.redacted == {"vault/server.md": len(EVERY_SECRET)}
    assert again.unchanged == ["vault/server.md"]  # redaction is stable: nothing re-embedded
    assert all(secret not in stored for secret in EVERY_SECRET)
    assert tree_state(vault) == before
