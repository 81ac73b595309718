"""Mail as a source (MAIL, kb.sources.mail): an mbox written with `mailbox`, a Maildir and an
`.eml`, ingested into embedded Qdrant (MiniLM) and searched through the MCP tools with the
`email` kind, the sender and recipient filters and the attachment's locator."""

from __future__ import annotations

import mailbox
import shutil
from email.message import EmailMessage
from pathlib import Path

import pytest
from helpers import free_port
from ingest_fixtures import make_settings
from mcp_fixtures import call_tool, results, serve_in_process, tool_answer

from kb.app.backend import embed_client, open_store
from kb.app.ingest import run
from kb.core.settings import Settings
from kb.sources.mail import own_text

SOURDOUGH = "Feed the starter with rye flour at eight, then again at noon; bake on Saturday."


def message(subject: str, sender: str, to: str, text: str, **headers: str) -> EmailMessage:
    made = EmailMessage()
    made["Subject"], made["From"], made["To"] = subject, sender, to
    made["Date"] = headers.pop("date", "Sat, 01 Mar 2025 09:30:00 +0000")
    for name, value in headers.items():
        made[name.replace("_", "-")] = value
    made.set_content(text)
    return made


def html_only(subject: str, sender: str, to: str, html: str, message_id: str) -> EmailMessage:
    made = EmailMessage()
    made["Subject"], made["From"], made["To"] = subject, sender, to
    made["Message-ID"] = message_id
    made.set_content(html, subtype="html")
    return made


def write_mail(root: Path) -> dict[str, Path]:
    """A Takeout-like mbox (a thread of two, and an HTML-only message with an attachment), a
    Maildir of one, an .eml of one."""
    mbox_path = root / "Takeout" / "All mail.mbox"
    mbox_path.parent.mkdir(parents=True)
    box = mailbox.mbox(mbox_path)
    first = message("Sourdough schedule", "Ana Diaz <ana@example.com>", "me@example.com",
                    f"{SOURDOUGH}\n\n-- \nAna Diaz\nBakery club treasurer, phone 555-0199\n",
                    message_id="<starter-1@example.com>")  # fmt: skip
    reply = message(
        "Re: Sourdough schedule", "me@example.com", "Ana Diaz <ana@example.com>",
        "Thanks! I will bring the banneton baskets and a spare dutch oven.\n\n"
        "On Sat, 1 Mar 2025, Ana Diaz wrote:\n"
        + "".join(f"> {line}\n" for line in SOURDOUGH.split("; ")),
        message_id="<starter-2@example.com>", in_reply_to="<starter-1@example.com>",
        references="<starter-1@example.com>", date="Sat, 01 Mar 2025 11:00:00 +0000",
    )  # fmt: skip
    trip = html_only("Glacier trip", "Bob <bob@example.org>", "me@example.com",
                     "<html><body><p>Route and <b>permits</b> for the glacier hike.</p>"
                     "<blockquote>old quoted planning thread about kayaks</blockquote>"
                     "</body></html>", "<trip@example.org>")  # fmt: skip
    trip.add_attachment(b"crampons\nice axe\nharness and two locking carabiners\n",
                        maintype="text", subtype="plain", filename="packing-list.txt")  # fmt: skip
    for made in (first, reply, trip):
        box.add(made)
    box.flush()
    box.close()
    maildir = mailbox.Maildir(root / "Maildir", create=True)
    maildir.add(message("Kayak rental receipt", "rentals@lake.example", "me@example.com",
                        "Two sea kayaks rented for the weekend; paddles and spray skirts "
                        "included.", message_id="<kayak@lake.example>"))  # fmt: skip
    maildir.add(message("Huge newsletter", "news@example.net", "me@example.com",
                        "spam " * 20_000, message_id="<huge@example.net>"))  # fmt: skip
    eml = root / "dentist.eml"
    eml.write_bytes(bytes(message("Dentist appointment", "clinic@teeth.example",
                                  "me@example.com", "Your cleaning is booked for 14 April.",
                                  message_id="<dentist@teeth.example>")))  # fmt: skip
    return {"mbox": mbox_path, "maildir": root / "Maildir", "eml": eml}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder_url: str) -> tuple[Settings, dict]:
    root = tmp_path_factory.mktemp("mail")
    paths = write_mail(root / "exports")
    mail = ",".join(str(p) for p in paths.values())
    settings = make_settings(root, embedder_url, MAIL=mail, NOTE_MAX_BYTES=50_000)
    with open_store(settings) as store, embed_client(settings) as client:
        summary = run(settings, client, store)
    return settings, {"summary": summary, **paths}


def served(settings: Settings, tmp_path: Path) -> Settings:
    copy = tmp_path / "qdrant"
    shutil.copytree(settings.QDRANT_PATH, copy)
    return settings.model_copy(update={"QDRANT_PATH": str(copy), "MCP_PORT": free_port()})


def test_each_message_of_an_mbox_a_maildir_and_an_eml_is_one_email_item(corpus):
    _, found = corpus
    summary = found["summary"]
    assert len(summary.added) == 5
    assert all(s.startswith("mail/") for s in summary.added)
    assert {s.split("/")[1] for s in summary.added} == {"All mail.mbox", "Maildir", "dentist.eml"}
    [failure] = summary.failed  # the huge message fails alone, by name and size
    assert failure.source.startswith("mail/Maildir/")
    assert "over 50000 bytes (NOTE_MAX_BYTES)" in failure.reason


def test_messages_are_searched_with_their_kind_sender_recipient_and_attachment_locator(
    corpus, tmp_path
):
    settings, _ = corpus
    with serve_in_process(served(settings, tmp_path)) as server:
        packing = {"query": "crampons and an ice axe", "kind": "email", "k": 3}
        [top, *_] = results(call_tool(server.url, "search_notes", packing))
        assert top["source"].startswith("mail/All mail.mbox/")
        assert top["kind"] == "email"
        assert "Attachment: packing-list.txt" in top["locator"]
        mine = {"query": "sourdough starter", "sender": "ANA@example.com", "k": 10}
        hits = results(call_tool(server.url, "search_notes", mine))
        assert [h["title"] for h in hits] == ["Sourdough schedule"]
        to_ana = {"query": "sourdough starter", "recipient": "ana@example.com", "k": 10}
        hits = results(call_tool(server.url, "search_notes", to_ana))
        assert [h["title"] for h in hits] == ["Re: Sourdough schedule"]
        kayak = {"query": "kayak rental", "kind": "email", "k": 1}
        [hit] = results(call_tool(server.url, "search_notes", kayak))
        assert hit["source"].startswith("mail/Maildir/")
        why = tool_answer(call_tool(server.url, "why_not_found", {"source": hit["source"]}))
        assert why["state"] == "indexed"
        unseen = {"source": "mail/Maildir/0123456789abcdef"}
        why = tool_answer(call_tool(server.url, "why_not_found", unseen))
        assert why["state"] == "never_seen"
        assert "no message of the MAIL mailboxes is named so" in str(why["story"])


def test_a_reply_is_read_without_the_thread_it_quotes_nor_the_signature(corpus, tmp_path):
    settings, _ = corpus
    with serve_in_process(served(settings, tmp_path)) as server:
        query = {"query": "banneton baskets dutch oven", "kind": "email", "k": 1}
        [reply] = results(call_tool(server.url, "search_notes", query))
        text = tool_answer(call_tool(server.url, "read_note", {"source": reply["source"]}))
        assert "banneton baskets" in text["text"]
        assert "rye flour" not in text["text"] and "wrote:" not in text["text"]
        query = {"query": "glacier hike permits", "kind": "email", "k": 1}
        [trip] = results(call_tool(server.url, "search_notes", query))
        text = tool_answer(call_tool(server.url, "read_note", {"source": trip["source"]}))
        assert "permits" in text["text"] and "kayaks" not in text["text"]  # the blockquote
        query = {"query": "sourdough schedule rye", "sender": "ana@example.com", "k": 1}
        [first] = results(call_tool(server.url, "search_notes", query))
        text = tool_answer(call_tool(server.url, "read_note", {"source": first["source"]}))
        assert "rye flour" in text["text"] and "555-0199" not in text["text"]


def test_a_message_gone_from_its_mailbox_is_soft_deleted(corpus, tmp_path):
    settings, found = corpus
    settings = served(settings, tmp_path)
    [kayak] = [p for p in found["maildir"].glob("*/*") if b"Kayak rental" in p.read_bytes()]
    kept = tmp_path / "kayak-message"
    shutil.move(kayak, kept)  # put back after the test: the module's mailboxes are shared
    try:
        with open_store(settings) as store, embed_client(settings) as client:
            summary = run(settings, client, store)
        [gone] = summary.deleted
        assert gone.startswith("mail/Maildir/")
        with serve_in_process(settings) as server:
            query = {"query": "kayak rental", "kind": "email", "k": 5}
            hits = results(call_tool(server.url, "search_notes", query))
            assert gone not in [h["source"] for h in hits]
            listed = tool_answer(call_tool(server.url, "list_deleted", {}))
            assert gone in str(listed)
    finally:
        shutil.move(kept, kayak)


def test_own_text_drops_quoted_lines_their_lead_and_the_signature():
    text = "Sounds good.\n\nOn Mon, Bob wrote:\n> the old plan\n> more\n\n-- \nMe\n555"
    assert own_text(text) == "Sounds good."
    assert own_text("> only a quote") == ""
