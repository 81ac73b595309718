"""EMBED_BACKEND=auto with EMBED_DTYPE=auto on a CPU: measure the engines, run the fastest.

A table of CPU classes cannot know a CPU: bf16 without AMX ran 2.3x fp32 on an AMD Zen 4 and
0.7x on an Intel part of the same class. So at first start, after the port opens (/health is 503
`model_loading` meanwhile, as during the load itself), the embedder runs each candidate engine
this install carries (`candidates`) on the loaded model:

1. its vectors of the probe texts (embed_server.probe: one- and two-word inputs, queries with
   their instruction, sentences, code) against torch fp32's: lowest cosine >= BOUND or it is out;
2. a document batch as the engine runs them (two micro-batches of DOC_TOKENS side by side on
   torch, one batch of two on ONNX Runtime), best of DOC_RUNS; a QUERY_TOKENS-token query alone
   (every token computed), best of QUERY_RUNS, each after one untimed run. On torch the timed
   forwards run through the first TIMED_LAYERS layers only, scaled to all: the layers are one
   shape, so the ratios hold, at a seventh of the time on Qwen3-0.6B (an ONNX candidate makes
   every engine run whole).
   torch fp32 is timed alone first and then becomes int8 in place (no second load); the other
   engines are timed in interleaved rounds, as many loaded at once as fit in the memory fp32
   took alone, so that load from other processes hits each alike.

Documents then run on the engine with the fastest batch, queries on the one with the fastest
query (of engines within CLOSE of the fastest, the most accurate); a second engine is loaded for
queries only when it answers them SPLIT_GAIN times faster and the memory it needs is free. The
decision is kept in EMBED_STATE_DIR under a key of what it depends on (CPU model and features,
threads, model files, library versions, the candidates), with int8's calibration beside it, so
later starts load the engine directly; any change of the key measures again.
"""

from __future__ import annotations

import copy
import logging
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from embed_server import hardware
from embed_server.autotune_calibration import read_calibration, write_calibration
from embed_server.autotune_decision import (
    BOUND,
    DOC_TOKENS,
    QUERY_TOKENS,
    Decision,
    Engine,
    Figures,
    _ms,
    cache_path,
    label,
    parse,
    read_cached,
    write_cached,
)
from embed_server.autotune_measure import DOC_RUNS, QUERY_RUNS, TIMED_LAYERS, activate, measure
from embed_server.onnx_backend import FILES, onnx_dir, onnx_exported

if TYPE_CHECKING:
    from embed_server.model import Embedder

# what callers read here (the decision, the int8 calibration and the measuring have modules of
# their own: autotune_decision, autotune_calibration, autotune_measure)
__all__ = [
    "BOUND",
    "DOC_RUNS",
    "DOC_TOKENS",
    "QUERY_RUNS",
    "QUERY_TOKENS",
    "SPLIT_GAIN",
    "TIMED_LAYERS",
    "VERSION",
    "Decision",
    "Engine",
    "Figures",
    "available_bytes",
    "cache_key",
    "cache_path",
    "candidates",
    "cpu_name",
    "decide",
    "label",
    "library_versions",
    "measure",
    "parse",
    "read_cached",
    "read_calibration",
    "split_queries",
    "write_cached",
    "write_calibration",
]

log = logging.getLogger("embedder.auto")

SPLIT_GAIN = 1.25
VERSION = 3  # of what is measured: raising it measures again everywhere (3: two-pass int8)


def candidates(embedder: Embedder) -> list[Engine]:
    """The engines this install carries and this CPU runs natively, in the order measured: torch
    fp32 first (the reference), then torch int8 (made from it in place: no second load), bf16
    only where the CPU computes it (elsewhere it is emulated, several times slower), ONNX Runtime
    where the model was exported and onnxruntime is installed. int8 needs x86 (fbgemm)."""
    features = hardware.cpu_features()
    x86 = platform.machine().lower() in {"x86_64", "amd64"}
    engines: list[Engine] = [("torch", "fp32")]
    if x86:
        engines.append(("torch", "int8"))
    if x86 and {"avx512_bf16", "amx_tile"} & features:
        engines.append(("torch", "bf16"))
    if _onnxruntime_version() is not None:
        root = embedder.settings.EMBED_ONNX_DIR
        engines += [("onnx", d) for d in FILES if onnx_exported(root, embedder.folder, d)]
    return engines


def _onnxruntime_version() -> str | None:
    try:
        import onnxruntime  # optional: only to know whether it is there
    except ImportError:
        return None
    return str(onnxruntime.__version__)


def cpu_name() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what Python knows of it."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith(("model name", "Model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _files(folder: Path) -> list[list[Any]]:
    out: list[list[Any]] = []
    if folder.is_dir():
        for path in sorted(folder.iterdir()):
            if path.is_file():  # through symlinks (the Hugging Face cache's blobs)
                stat = path.stat()
                out.append([path.name, stat.st_size, stat.st_mtime_ns])
    return out


def _features() -> set[str]:
    return hardware.cpu_features() | ({"vnni"} if torch.cpu._is_vnni_supported() else set())


def library_versions() -> dict[str, str | None]:
    import transformers  # loaded already by the model

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnxruntime": _onnxruntime_version(),
    }


def cache_key(embedder: Embedder, engines: Sequence[Engine]) -> dict[str, Any]:
    """What the decision depends on: a change of any of it measures again."""
    exports = onnx_dir(embedder.settings.EMBED_ONNX_DIR, embedder.folder)
    return {
        "version": VERSION,
        "cpu": cpu_name(),
        "machine": platform.machine(),
        # as this process sees them (an ISA cap or a CPUID mask counts)
        "features": sorted(_features()),
        "capability": torch.backends.cpu.get_cpu_capability(),
        "threads": embedder.threads,
        "model": embedder.name,
        "model_files": _files(embedder.folder),
        "onnx_files": _files(exports) if any(e[0] == "onnx" for e in engines) else [],
        "versions": library_versions(),
        "candidates": [label(e) for e in engines],
    }


def available_bytes() -> int | None:
    """Memory this process may still take: the container's cgroup limit less its use, or the
    system's MemAvailable, whichever is lower; None where neither is known."""
    values: list[int] = []
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        current = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            values.append(int(limit) - current)
    except (OSError, ValueError):
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                values.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return min(values) if values else None


def split_queries(
    embedder: Embedder, decision: Decision, loaded: dict[str, dict[str, Any]] | None = None
) -> None:
    """Load the queries' engine beside the documents' when it answers them SPLIT_GAIN times
    faster and its memory is free (about its weights' size, measured, plus a quarter);
    `loaded`: engines measure() left loaded, used instead of loading again."""
    if decision.queries == decision.documents:
        return
    by_name = {f.engine: f for f in decision.figures}
    doc, query = by_name[decision.documents], by_name[decision.queries]
    if not (doc.query_s and query.query_s and query.query_s * SPLIT_GAIN <= doc.query_s):
        decision.query_note = (
            f"queries stay on {decision.documents}: {decision.queries} answers them less than "
            f"{SPLIT_GAIN:g}x faster"
        )
        return
    need = int((query.size_mb or 0) * 2**20 * 1.25) + 256 * 2**20
    free = available_bytes()
    if free is not None and free < need:
        decision.query_note = (
            f"queries stay on {decision.documents}: {decision.queries} would need "
            f"{need / 2**20:,.0f} MB more memory, {free / 2**20:,.0f} MB is free"
        )
        return
    second = copy.copy(embedder)
    second.query_encoder = None
    if loaded and decision.queries in loaded:
        activate(second, loaded[decision.queries])
    else:
        second.load_engine(*parse(decision.queries))
    embedder.query_encoder = second
    decision.query_engine = decision.queries
    decision.query_note = (
        f"{decision.queries} loaded beside it for queries (+{query.size_mb:,.0f} MB)"
    )


def decide(embedder: Embedder) -> Decision:
    """Choose and load the engines (cached decision, else measured), for /health and the log."""
    engines = candidates(embedder)
    key = cache_key(embedder, engines)
    path = cache_path(embedder.settings.EMBED_STATE_DIR, key)
    decision = read_cached(path, key)
    loaded: dict[str, dict[str, Any]] = {}
    if decision is not None:
        embedder.calibration = read_calibration(path)
        embedder.load_engine(*parse(decision.documents))
    else:
        decision, loaded = measure(embedder, engines, key)
        if write_cached(path, decision):
            decision.cache_file = str(path)
            if embedder.calibration is not None:
                write_calibration(path, embedder.calibration)
    split_queries(embedder, decision, loaded)
    embedder.decision = decision.report()
    figures = ", ".join(
        f"{f.engine} {_ms(f.document_batch_s)}/{_ms(f.query_s)} cos {f.min_cosine:.5f}"
        if f.min_cosine is not None
        else f.engine
        for f in decision.figures
    )
    if decision.cached:
        log.info(
            "auto: %s (measured %s, kept in %s; delete it to measure again)",
            decision.reason(),
            decision.measured_at,
            path,
        )
    else:
        log.info(
            "auto: measured %d engines in %.1f s (document batch/query, lowest cosine to fp32): "
            "%s; %s",
            len(decision.figures),
            decision.seconds,
            figures,
            decision.reason(),
        )
    return decision
