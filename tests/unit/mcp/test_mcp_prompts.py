"""The MCP prompts (notes_server.prompts) through the real SDK client, connected in-process: what
prompts/list offers as commands, what prompts/get renders from the arguments, and the one-line
errors for a missing, blank, unknown or malformed argument. Rendering touches no store, so the
server here has none (an unreachable embedder, an empty folder)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from ingest_fixtures import make_settings
from mcp import Client
from mcp.shared.exceptions import MCPError

from kb.app.backend import Backend
from notes_server.app import build_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    backend = Backend(make_settings(tmp_path_factory.mktemp("prompts")))
    yield build_server(backend)
    backend.close()


def talk(server, ask) -> Any:
    async def go() -> Any:
        async with Client(server) as client:
            try:
                return await ask(client)
            except MCPError as exc:  # returned: raised, the client's task groups would wrap it
                return exc

    return anyio.run(go)


def get(server, name: str, arguments: dict[str, str]) -> str:
    """The one user message prompts/get returns (an MCPError is raised as it came)."""

    async def ask(client: Client) -> Any:
        return await client.get_prompt(name, arguments)

    result = talk(server, ask)
    if isinstance(result, MCPError):
        raise result
    [message] = result.messages
    assert message.role == "user"
    return message.content.text


def error(server, name: str, arguments: dict[str, str]) -> str:
    with pytest.raises(MCPError) as caught:
        get(server, name, arguments)
    assert caught.value.code == -32602  # invalid params: the caller's to fix
    return caught.value.message


def test_prompts_list_offers_the_three_commands_with_their_arguments(server) -> None:
    async def ask(client: Client) -> Any:
        return await client.list_prompts()

    listed = {p.name: p for p in talk(server, ask).prompts}
    assert set(listed) == {"ask", "saved_about", "related_to_file"}
    arguments = {
        name: [(a.name, a.required) for a in prompt.arguments] for name, prompt in listed.items()
    }
    assert arguments == {
        "ask": [("question", False)],
        "saved_about": [("topic", True), ("since", False), ("until", False)],
        "related_to_file": [("path", False)],
    }
    for prompt in listed.values():
        assert prompt.title and prompt.description
        assert all(a.description for a in prompt.arguments)


def test_ask_puts_the_question_to_search_notes_and_asks_for_citations(server) -> None:
    text = get(server, "ask", {"question": "How long do I ferment kimchi?"})
    assert text.startswith("Answer from my notes: How long do I ferment kimchi?")
    assert "search_notes" in text and "read_note" in text and "Cite every claim" in text
    assert "never instructions" in text
    # Claude Code sends one word per argument: the question may come in the next message
    assert get(server, "ask", {}).startswith("Answer the question I ask next from my notes.")


def test_saved_about_turns_its_dates_into_the_ingested_filters(server) -> None:
    text = get(server, "saved_about", {"topic": "sourdough", "since": "2024-01-01",
                                       "until": "2024-06-30"})  # fmt: skip
    assert text.startswith(
        "What have I saved about sourdough (since 2024-01-01, until 2024-06-30)?"
    )
    assert "ingested_from='2024-01-01', ingested_to='2024-06-30'" in text
    plain = get(server, "saved_about", {"topic": "sourdough"})
    assert plain.startswith("What have I saved about sourdough?") and "ingested_" not in plain


def test_related_to_file_names_the_file_or_the_one_being_worked_on(server) -> None:
    text = get(server, "related_to_file", {"path": "src/parser.py"})
    assert "related to the file src/parser.py" in text and "alternates" in text
    assert "the file we are working on" in get(server, "related_to_file", {})


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("ask", {"question": "x", "k": "3"},
         "prompt ask: unknown argument k; usage: ask [question]"),
        ("saved_about", {"topic": " "},
         "prompt saved_about: missing topic; usage: saved_about <topic> [since] [until]"),
        ("saved_about", {"since": "2024-01-01"},
         "prompt saved_about: missing topic; usage: saved_about <topic> [since] [until]"),
        ("saved_about", {"topic": "x", "from": "2024"},
         "prompt saved_about: unknown argument from; usage: saved_about <topic> [since] [until]"),
        ("saved_about", {"topic": "x", "until": "last week"},
         "prompt saved_about: until: 'last week' is not an ISO date or datetime (e.g. "
         "2024-03-01 or 2024-03-01T14:30)"),
    ],
)  # fmt: skip
def test_a_wrong_or_missing_argument_is_refused_in_one_line_naming_it(
    server, name: str, arguments: dict[str, str], expected: str
) -> None:
    assert error(server, name, arguments) == expected


def test_an_unknown_prompt_is_refused_by_name(server) -> None:
    async def ask(client: Client) -> Any:
        return await client.get_prompt("summarise", {})

    failed = talk(server, ask)
    assert isinstance(failed, MCPError) and failed.code == -32602
    assert (
        failed.message
        == "unknown prompt 'summarise'; the prompts: ask, saved_about, related_to_file"
    )
