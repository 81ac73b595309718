"""The embedder's optional bearer key (EMBED_API_KEY): a real embedder process started with a
key, the openai SDK and plain HTTP against it, kb's EmbedClient, and the scripts and the MCP
server as users run them, each saying in one line which setting to fix."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import openai
import pytest
from conftest import EmbedderFactory
from helpers import REPO_ROOT
from ingest_fixtures import KIMCHI, make_settings, run_script, script_env, write
from mcp_fixtures import ServerFactory, call_tool, error_text

from kb.app.backend import embed_client
from kb.embedding.client import EmbedClient, EmbedError

KEY = "test-embedder-key-0123456789"


@pytest.fixture(scope="module")
def keyed_url(start_embedder: EmbedderFactory, minilm_path) -> str:
    """A real MiniLM embedder process that requires KEY."""
    return start_embedder({"EMBED_MODEL": str(minilm_path), "EMBED_API_KEY": KEY}).url


def assert_401(response: httpx.Response) -> str:
    assert response.status_code == 401, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "invalid_api_key"
    assert KEY not in response.text
    return error["message"]


def test_the_openai_sdk_embeds_with_the_key_and_gets_401_without_it(
    keyed_url: str, minilm_path
) -> None:
    with openai.OpenAI(base_url=f"{keyed_url}/v1", api_key=KEY, max_retries=0) as sdk:
        response = sdk.embeddings.create(model=str(minilm_path), input=["kimchi", "bread"])
    assert [len(item.embedding) for item in response.data] == [384, 384]
    wrong = openai.OpenAI(base_url=f"{keyed_url}/v1", api_key="wrong", max_retries=0)
    with wrong, pytest.raises(openai.AuthenticationError) as raised:
        wrong.embeddings.create(model=str(minilm_path), input="kimchi")
    assert raised.value.status_code == 401
    assert raised.value.code == "invalid_api_key"
    assert "EMBED_API_KEY" in raised.value.message


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {KEY[:-1]}"},
        {"Authorization": f"Bearer {KEY}x"},
        {"Authorization": f"Basic {KEY}"},
        {"Authorization": KEY},
    ],
    ids=["none", "empty", "shorter", "longer", "other-scheme", "no-scheme"],
)
def test_a_missing_or_wrong_key_gets_401_in_the_error_envelope_on_every_api_route(
    keyed_url: str, headers: dict[str, str]
) -> None:
    body = {"input": "kimchi"}
    message = assert_401(httpx.post(f"{keyed_url}/v1/embeddings", json=body, headers=headers))
    assert "EMBED_API_KEY" in message
    assert_401(httpx.get(f"{keyed_url}/v1/models", headers=headers))


def test_without_the_key_nothing_reads_the_body_not_even_a_broken_one(keyed_url: str) -> None:
    response = httpx.post(f"{keyed_url}/v1/embeddings", content=b"{not json")
    assert_401(response)


def test_the_key_opens_models_and_health_stays_open_revealing_no_key(keyed_url: str) -> None:
    models = httpx.get(f"{keyed_url}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert models.status_code == 200, models.text
    health = httpx.get(f"{keyed_url}/health")
    assert health.status_code == 200 and health.json() == {"status": "ok"}  # no key: no details
    keyed = httpx.get(f"{keyed_url}/health", headers={"Authorization": f"Bearer {KEY}"})
    assert keyed.json()["dimensions"] == 384
    for answer in (health, keyed):
        assert KEY not in answer.text and "key" not in answer.text.lower()


def test_embed_client_sends_the_key_from_settings(keyed_url: str, tmp_path) -> None:
    settings = make_settings(tmp_path, keyed_url, EMBED_API_KEY=KEY)
    with embed_client(settings) as client:
        [vector] = client.embed_documents(["kimchi"])
        assert len(vector) == client.dimensions == 384


@pytest.mark.parametrize(("key", "says"), [("", "requires a key"), ("wrong", "is not the key")])
def test_embed_client_without_the_right_key_raises_one_error_naming_the_setting_unretried(
    keyed_url: str, key: str, says: str
) -> None:
    with EmbedClient(keyed_url, api_key=key, retries=3) as client:
        with pytest.raises(EmbedError) as raised:
            client.embed_query("kimchi")
        assert client.calls == 1
    assert (raised.value.status, raised.value.code) == (401, "invalid_api_key")
    assert "EMBED_API_KEY" in raised.value.message and says in raised.value.message


def test_an_embedder_without_a_key_ignores_one_sent_by_the_client(embedder_url: str) -> None:
    with EmbedClient(embedder_url, api_key="unneeded") as client:
        assert len(client.embed_query("kimchi")) == 384


def run_smoke(url: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "smoke.py"), "--wait", "0"],
        cwd=REPO_ROOT,
        env={**os.environ, "EMBED_URL": url, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    line = stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and "EMBED_API_KEY" in line, stderr
    return line


def test_smoke_without_the_key_fails_in_one_line_naming_embed_api_key(keyed_url: str) -> None:
    result = run_smoke(keyed_url)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "401" in _one_error_line(result.stderr)


def test_smoke_passes_with_the_key(keyed_url: str) -> None:
    result = run_smoke(keyed_url, EMBED_API_KEY=KEY)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["smoke ok", "client ok"]


def test_ingest_and_query_without_the_key_fail_in_one_line_and_work_with_it(
    keyed_url: str, tmp_path
) -> None:
    settings = make_settings(tmp_path, keyed_url)
    write(settings.NOTES_DIR / "kimchi.md", KIMCHI)
    result = run_script("ingest.py", env=script_env(settings), cwd=tmp_path)
    assert result.returncode == 1
    assert "401" in _one_error_line(result.stderr)
    assert (settings.NOTES_DIR / "kimchi.md").is_file()  # left in the inbox
    keyed = script_env(settings, EMBED_API_KEY=KEY)
    result = run_script("ingest.py", env=keyed, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    result = run_script("query.py", "fermented cabbage", env=script_env(settings), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    _one_error_line(result.stderr)
    result = run_script("query.py", "fermented cabbage", env=keyed, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "kimchi.md" in result.stdout


def test_the_mcp_server_without_the_key_answers_a_tool_error_naming_embed_api_key(
    keyed_url: str, start_server: ServerFactory, store_copy
) -> None:
    server = start_server(EMBED_URL=keyed_url, QDRANT_PATH=str(store_copy()))
    message = error_text(call_tool(server.url, "search_notes", {"query": "kimchi"}))
    assert "EMBED_API_KEY" in message and "Traceback" not in message
    keyed = start_server(EMBED_URL=keyed_url, QDRANT_PATH=str(store_copy()), EMBED_API_KEY=KEY)
    hits = call_tool(keyed.url, "search_notes", {"query": "kimchi"})
    assert not hits.is_error
