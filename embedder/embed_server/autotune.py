"""EMBED_BACKEND=auto with EMBED_DTYPE=auto on a CPU: measure the engines, run the fastest.

A table of CPU classes cannot know a CPU: bf16 without AMX ran 2.3x fp32 on an AMD Zen 4 and
0.7x on an Intel part of the same class. So at first start, after the port opens (/health is 503
`model_loading` meanwhile, as during the load itself), the embedder runs each candidate engine
this install carries (`candidates`) on the loaded model:

1. its vectors of the probe texts (embed_server.probe: one- and two-word inputs, queries with
   their instruction, sentences, code) against torch fp32's: lowest cosine >= BOUND or it is out;
2. a document batch as the engine runs them (two micro-batches of DOC_TOKENS side by side on
   torch, one batch of two on ONNX Runtime), best of DOC_RUNS; a QUERY_TOKENS-token query alone,
   best of QUERY_RUNS. torch fp32 is timed alone first and then becomes int8 in place (no second
   load); the other engines are timed in interleaved rounds, as many loaded at once as fit in the
   memory fp32 took alone, so that load from other processes hits each alike.

Documents then run on the engine with the fastest batch, queries on the one with the fastest
query (of engines within CLOSE of the fastest, the most accurate); a second engine is loaded for
queries only when it answers them SPLIT_GAIN times faster and the memory it needs is free. The
decision is kept in EMBED_STATE_DIR under a key of what it depends on (CPU model and features,
threads, model files, library versions, the candidates), with int8's calibration beside it, so
later starts load the engine directly; any change of the key measures again.
"""

from __future__ import annotations

import copy
import gc
import hashlib
import json
import logging
import math
import os
import platform
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from embed_server import hardware, int8
from embed_server.batching import encode_ids
from embed_server.onnx_backend import FILES, onnx_dir, onnx_exported
from embed_server.probe import CALIBRATION_TEXTS, PROBE_DOCUMENTS, PROBE_QUERIES

if TYPE_CHECKING:
    from embed_server.model import Embedder

MAX_WORKERS = 2  # as model.MAX_SIDE_BY_SIDE: micro-batches side by side

log = logging.getLogger("embedder.auto")

BOUND = 0.995  # lowest cosine to fp32 over the probe texts
DOC_TOKENS = 128
QUERY_TOKENS = 20
DOC_RUNS = 2
QUERY_RUNS = 3
SPLIT_GAIN = 1.25
VERSION = 1  # of what is measured: raising it measures again everywhere
Engine = tuple[str, str]
clock = time.perf_counter  # what the timings read (a test's fake engines bring their own)


def label(engine: Sequence[str]) -> str:
    return " ".join(engine)


def parse(text: str) -> Engine:
    backend, dtype = text.split()
    return backend, dtype


@dataclass
class Figures:
    """One candidate's measurement (None where it was not measured: `note` says why)."""

    engine: str
    min_cosine: float | None = None
    document_batch_s: float | None = None
    query_s: float | None = None
    size_mb: float | None = None
    note: str = ""


@dataclass
class Decision:
    documents: str
    queries: str
    figures: list[Figures]
    seconds: float
    measured_at: str
    key: dict[str, Any]
    cached: bool = False
    cache_file: str | None = None
    # the query engine when it runs apart, or why it does not
    query_engine: str | None = None
    query_note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def reason(self) -> str:
        by_name = {f.engine: f for f in self.figures}
        doc, query = by_name[self.documents], by_name[self.queries]
        ref = self.figures[0]
        parts = [
            f"{self.documents} for documents: fastest within lowest cosine >= {BOUND} "
            f"({_ms(doc.document_batch_s)} per {DOC_TOKENS}-token batch pair, "
            f"{_ratio(ref.document_batch_s, doc.document_batch_s)} {ref.engine})"
        ]
        parts.append(
            f"{self.queries} for queries ({_ms(query.query_s)} per {QUERY_TOKENS}-token query, "
            f"{_ratio(ref.query_s, query.query_s)} {ref.engine})"
        )
        if self.query_note:
            parts.append(self.query_note)
        return "; ".join(parts)

    def report(self) -> dict[str, Any]:
        """What /health shows: the choice, why, and every candidate's figures."""
        return {
            "measured": True,
            "cached": self.cached,
            "documents": self.documents,
            "queries": self.query_engine or self.documents,
            "fastest_for_queries": self.queries,
            "reason": self.reason(),
            "bound_min_cosine": BOUND,
            "seconds": round(self.seconds, 1),
            "measured_at": self.measured_at,
            "cache_file": self.cache_file,
            "candidates": [
                {k: (round(v, 5) if isinstance(v, float) else v) for k, v in asdict(f).items()}
                for f in self.figures
            ],
        }


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def _ratio(reference: float | None, seconds: float | None) -> str:
    if reference is None or not seconds:
        return "vs"
    return f"{reference / seconds:.2f}x"


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


def cache_path(state_dir: str, key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return Path(state_dir).expanduser() / f"auto-engine-{digest}.json"


def read_cached(path: Path, key: dict[str, Any]) -> Decision | None:
    """The decision kept at `path` for exactly `key`; None if there is none (or it is unreadable:
    then measured again, and said)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["key"] != key:
            return None
        figures = [Figures(**f) for f in data["figures"]]
        return Decision(
            documents=data["documents"],
            queries=data["queries"],
            figures=figures,
            seconds=float(data["seconds"]),
            measured_at=data["measured_at"],
            key=key,
            cached=True,
            cache_file=str(path),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("auto: ignoring the unreadable decision in %s (%s); measuring again", path, exc)
        return None


def write_cached(path: Path, decision: Decision) -> bool:
    """Keep the decision (atomically: replicas may share the folder); False, said once, when the
    folder is not writable: the next start then measures again."""
    data = {
        "key": decision.key,
        "documents": decision.documents,
        "queries": decision.queries,
        "figures": [asdict(f) for f in decision.figures],
        "seconds": decision.seconds,
        "measured_at": decision.measured_at,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=path.parent, prefix=".auto-engine-", suffix=".tmp", delete=False
        ) as tmp:
            json.dump(data, tmp, indent=1)
        os.replace(tmp.name, path)
    except OSError as exc:
        log.warning(
            "auto: could not keep the decision in %s (%s): the next start measures again; "
            "set EMBED_STATE_DIR to a writable folder",
            path.parent,
            exc,
        )
        return False
    return True


def _ids(embedder: Embedder, length: int) -> np.ndarray:
    """`length` real token ids (the calibration texts repeated), as one input."""
    text = " ".join(CALIBRATION_TEXTS)
    ids = embedder.tokenize([text])[0]
    while len(ids) < length:
        ids = np.concatenate([ids, ids])
    return np.ascontiguousarray(ids[-length:])


# Memory of an engine against torch fp32's, before it is loaded (measured: Qwen3-0.6B shape).
_SIZE = {"fp32": 1.0, "bf16": 0.5, "int8": 0.56}
ROOM = 1.15  # engines loaded at once while measuring: at most this times torch fp32's memory
CLOSE = 1.10  # timings this close to the fastest: the most accurate of them is chosen


def _activate(embedder: Embedder, state: dict[str, Any]) -> None:
    """Make a loaded engine the one that runs (the others stay loaded, in `state`s)."""
    for name, value in state.items():
        setattr(embedder, name, value)


def _pick(figures: Sequence[Figures], seconds: Callable[[Figures], float | None]) -> Figures:
    """The fastest by `seconds`, or the most accurate of those within CLOSE of it (a load burst
    on a shared machine moves timings by more than that; accuracy does not move)."""
    timed = [f for f in figures if seconds(f)]
    fastest = min(seconds(f) or math.inf for f in timed)
    close = [f for f in timed if (seconds(f) or math.inf) <= CLOSE * fastest]
    return max(close, key=lambda f: (f.min_cosine or 0, -(seconds(f) or math.inf)))


def measure(
    embedder: Embedder, engines: Sequence[Engine], key: dict[str, Any]
) -> tuple[Decision, dict[str, dict[str, Any]]]:
    """Run every candidate (see the module's docstring). torch fp32 is timed first, alone, then
    becomes int8 in place; the others are timed in interleaved rounds (A B A B: a burst of load
    from elsewhere hits each alike) as many at once as fit in what fp32 took alone. Leaves the
    documents' engine running; returns the decision and the engines still loaded (by label)."""
    started = time.monotonic()
    texts = [*PROBE_DOCUMENTS, *(embedder.prompt("query") + q for q in PROBE_QUERIES)]
    probe = embedder.tokenize(texts)
    docs = [_ids(embedder, DOC_TOKENS)] * 2
    query = _ids(embedder, QUERY_TOKENS)
    reference: np.ndarray | None = None
    figures: list[Figures] = []
    pool: dict[str, dict[str, Any]] = {}  # loaded, within the bound, waiting to be timed or kept
    untimed: list[Figures] = []
    with ThreadPoolExecutor(max(1, MAX_WORKERS - 1), thread_name_prefix="auto") as threads:

        def run(ids: list[np.ndarray], batch_tokens: int) -> np.ndarray:
            workers = embedder.parallelism
            lanes = threads if workers > 1 else None
            return encode_ids(embedder, ids, batch_tokens, workers, lanes)

        def timed(ids: list[np.ndarray], batch_tokens: int) -> float:
            begin = clock()
            run(ids, batch_tokens)
            return clock() - begin

        def time_pool() -> None:
            """Time every engine waiting in the pool, interleaved; then keep the fastest for
            documents and for queries loaded, drop the others."""
            if not untimed:
                return
            doc_runs: dict[str, list[float]] = {f.engine: [] for f in untimed}
            query_runs: dict[str, list[float]] = {f.engine: [] for f in untimed}
            for _ in range(DOC_RUNS):
                for one in untimed:
                    _activate(embedder, pool[one.engine])
                    doc_runs[one.engine].append(timed(docs, 2 * DOC_TOKENS))
            for _ in range(QUERY_RUNS):
                for one in untimed:
                    _activate(embedder, pool[one.engine])
                    query_runs[one.engine].append(timed([query], QUERY_TOKENS))
            for one in untimed:
                one.document_batch_s = min(doc_runs[one.engine])
                one.query_s = min(query_runs[one.engine])
            untimed.clear()
            keep = {
                _pick(figures, lambda f: f.document_batch_s).engine,
                _pick(figures, lambda f: f.query_s).engine,
            }
            for name in list(pool):
                if name not in keep:
                    del pool[name]

        for engine in engines:
            loaded = label((embedder.backend, embedder.dtype)) if figures else None
            if figures and not (engine == ("torch", "int8") and loaded == "torch fp32"):
                fp32_mb = figures[0].size_mb or 0
                need = _SIZE[engine[1]] * fp32_mb
                held = sum(f.size_mb or 0 for f in figures if f.engine in pool)
                if held + need > ROOM * fp32_mb:
                    time_pool()
                    held = sum(f.size_mb or 0 for f in figures if f.engine in pool)
                if held + need > ROOM * fp32_mb:
                    pool.clear()  # no room even for the fastest so far: loaded again if it wins
                gc.collect()
            if engine == ("torch", "int8") and loaded == "torch fp32":
                embedder.quantize_in_place()  # from the fp32 weights in memory: no second load
            else:
                embedder.load_engine(*engine)
            one = Figures(label(engine), size_mb=round(embedder.size_bytes() / 2**20, 1))
            figures.append(one)
            vectors = run(probe, 2 * DOC_TOKENS)  # also the engine's warm-up
            if reference is None:
                reference = vectors
            one.min_cosine = float(np.sum(reference * vectors, axis=1).min())
            if one.min_cosine < BOUND:
                one.note = f"lowest cosine to fp32 below {BOUND}: not timed"
                continue
            if engine == engines[0]:  # the reference: timed alone, then gone
                one.document_batch_s = min(timed(docs, 2 * DOC_TOKENS) for _ in range(DOC_RUNS))
                one.query_s = min(timed([query], QUERY_TOKENS) for _ in range(QUERY_RUNS))
                continue
            pool[one.engine] = {name: getattr(embedder, name) for name in embedder._ENGINE}
            untimed.append(one)
        time_pool()
    documents = _pick(figures, lambda f: f.document_batch_s).engine
    queries = _pick(figures, lambda f: f.query_s).engine
    if documents in pool:
        _activate(embedder, pool[documents])
    else:
        embedder.load_engine(*parse(documents))
    kept = {name: state for name, state in pool.items() if name == queries and name != documents}
    pool.clear()
    gc.collect()
    decision = Decision(
        documents=documents,
        queries=queries,
        figures=figures,
        seconds=time.monotonic() - started,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        key=key,
    )
    return decision, kept


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
        _activate(second, loaded[decision.queries])
    else:
        second.load_engine(*parse(decision.queries))
    embedder.query_encoder = second
    decision.query_engine = decision.queries
    decision.query_note = (
        f"{decision.queries} loaded beside it for queries (+{query.size_mb:,.0f} MB)"
    )


def _calibration_path(path: Path) -> Path:
    return path.with_suffix(".int8.pt")


def read_calibration(path: Path) -> int8.Calibration | None:
    """The int8 calibration kept beside a decision (so that a later start loading int8 runs no
    calibration pass); None if there is none or it is unreadable."""
    try:
        data = torch.load(_calibration_path(path), weights_only=True)
        return int8.Calibration(data["maxima"], data["groups"], data["norms"])
    except FileNotFoundError:
        return None
    except (OSError, RuntimeError, KeyError, TypeError, ValueError) as exc:
        log.warning("auto: ignoring the unreadable int8 calibration beside %s (%s)", path, exc)
        return None


def write_calibration(path: Path, seen: int8.Calibration) -> None:
    target = _calibration_path(path)
    data = {"maxima": seen.maxima, "groups": seen.groups, "norms": seen.norms}
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as tmp:
            torch.save(data, tmp)
        os.replace(tmp.name, target)
    except OSError as exc:
        log.warning("auto: could not keep the int8 calibration in %s (%s)", target, exc)


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
