"""The containers' commands work outside Docker exactly as their CMD runs them: each Dockerfile's
CMD line is launched here as a process, with the environment the image (ENV) and
docker-compose.yml (`environment:`) give it, and must answer /health; the Dockerfile's and
compose's healthcheck commands must then report it healthy. Only what cannot exist here is
replaced: service names by 127.0.0.1 (tests bind loopback only), fixed ports by free ones, the
Qdrant server by an embedded store folder, and the image's Hugging Face cache by a temporary
one holding the real MiniLM weights under a hub id."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import pytest
from helpers import ServiceProcess, free_port
from stack_files import (
    EMBEDDER_DOCKERFILE,
    MCP_DOCKERFILE,
    REPO_ROOT,
    expected_names,
    load_compose,
    parse_dockerfile,
    service_environment,
)

HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"


def container_env(dockerfile: Path, service: str, overrides: Mapping[str, str]) -> dict[str, str]:
    """The environment the service's container gets, then the test's overrides."""
    # No setting leaks in from the developer's shell: only what the image and compose set.
    env = {k: v for k, v in os.environ.items() if k not in expected_names()}
    image = parse_dockerfile(dockerfile).final.env()
    image.pop("PATH")  # /opt/venv/bin: here sys.executable is the venv's python
    env |= image
    env |= service_environment(load_compose()["services"][service])
    env |= overrides
    return env


def cmd_argv(dockerfile: Path, keyword: str = "CMD") -> list[str]:
    argv = parse_dockerfile(dockerfile).final.exec_form(keyword)
    assert argv[0] == "python", argv
    return [sys.executable, *argv[1:]]


def compose_healthcheck_argv(service: str) -> list[str]:
    test = load_compose()["services"][service]["healthcheck"]["test"]
    assert test[:2] == ["CMD", "python"], test
    return [sys.executable, *test[2:]]


def healthcheck_passes(argv: list[str], env: Mapping[str, str]) -> bool:
    return subprocess.run(argv, env=env, capture_output=True, timeout=30).returncode == 0


def launch(argv: list[str], env: dict[str, str], port: int, log: Path) -> ServiceProcess:
    return ServiceProcess(argv, env, log, f"http://127.0.0.1:{port}")


def hub_cache_with_minilm(hf_home: Path, minilm_path: Path) -> None:
    """A Hugging Face cache laid out as the image's build step leaves it, holding MiniLM."""
    repo = hf_home / "hub" / ("models--" + HUB_ID.replace("/", "--"))
    snapshot = repo / "snapshots" / SNAPSHOT
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(SNAPSHOT)
    for item in minilm_path.iterdir():
        (snapshot / item.name).symlink_to(item)


@pytest.fixture(scope="module")
def embedder(
    tmp_path_factory: pytest.TempPathFactory, minilm_path: Path
) -> Iterator[ServiceProcess]:
    """embedder/Dockerfile's CMD with the image's and compose's environment, serving a hub id
    from an offline cache as the image does (HF_HUB_OFFLINE=1 comes from the Dockerfile)."""
    root = tmp_path_factory.mktemp("embedder-cmd")
    hub_cache_with_minilm(root / "hf", minilm_path)
    port = free_port()
    env = container_env(
        EMBEDDER_DOCKERFILE,
        "embedder",
        {
            "HF_HOME": str(root / "hf"),
            "EMBED_MODEL": HUB_ID,
            "EMBED_HOST": "127.0.0.1",
            "EMBED_PORT": str(port),
            "EMBED_THREADS": "2",
        },
    )
    service = launch(cmd_argv(EMBEDDER_DOCKERFILE), env, port, root / "embedder.log")
    try:
        yield service
    finally:
        service.stop()


def test_embedder_cmd_serves_the_baked_model_offline_and_reports_healthy(
    embedder: ServiceProcess,
) -> None:
    assert embedder.env["HF_HUB_OFFLINE"] == "1"
    health = embedder.wait_healthy().json()
    assert health["status"] == "ok"
    assert health["model"] == HUB_ID
    assert health["dimensions"] == 384
    assert healthcheck_passes(cmd_argv(EMBEDDER_DOCKERFILE, "HEALTHCHECK"), embedder.env)
    assert healthcheck_passes(compose_healthcheck_argv("embedder"), embedder.env)


def test_mcp_cmd_serves_health_with_the_compose_environment(
    embedder: ServiceProcess, tmp_path: Path
) -> None:
    embedder.wait_healthy()
    notes, store = tmp_path / "notes", tmp_path / "qdrant"
    notes.mkdir()
    (notes / "bread.md").write_text("---\ntags: [cooking]\n---\nKnead the dough for ten minutes.\n")
    ingest_env = container_env(
        MCP_DOCKERFILE,
        "mcp",
        {"EMBED_URL": embedder.base, "QDRANT_PATH": str(store), "NOTES_DIR": str(notes)},
    )
    ingest_env.pop("QDRANT_URL")  # compose's http://qdrant:6333; here an embedded store instead
    ingest = subprocess.run(
        [sys.executable, "ingest.py"],
        cwd=REPO_ROOT,
        env=ingest_env,
        capture_output=True,
        timeout=300,
    )
    assert ingest.returncode == 0, ingest.stdout.decode() + ingest.stderr.decode()

    port = free_port()
    env = {**ingest_env, "MCP_HOST": "127.0.0.1", "MCP_PORT": str(port)}
    server = launch(cmd_argv(MCP_DOCKERFILE), env, port, tmp_path / "mcp.log")
    try:
        health = server.wait_healthy(60).json()
        assert health["ok"] is True
        assert health["store"]["points"] >= 1
        assert health["embedder"]["model"] == HUB_ID
        assert healthcheck_passes(cmd_argv(MCP_DOCKERFILE, "HEALTHCHECK"), server.env)
        assert healthcheck_passes(compose_healthcheck_argv("mcp"), server.env)
        # compose passes MCP_ALLOWED_HOSTS="" and MCP_TOKEN="": the Host check stays on.
        hostile = httpx.get(f"{server.base}/health", headers={"Host": "evil.example:80"})
        assert hostile.status_code == 421
    finally:
        server.stop()
    # Once the server is gone the healthcheck reports it: the check can fail.
    assert not healthcheck_passes(cmd_argv(MCP_DOCKERFILE, "HEALTHCHECK"), server.env)
