"""auto's decision (embed_server.autotune): each candidate's figures, the choice and why, and
the file in EMBED_STATE_DIR that keeps it for later starts under the key it depends on."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("embedder.auto")

BOUND = 0.995  # lowest cosine to fp32 over the probe texts
DOC_TOKENS = 128
QUERY_TOKENS = 20
Engine = tuple[str, str]


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
    # "4 of 28 layers": the timings ran through that many and were scaled to all ("": all ran)
    timed_on: str = ""
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
        if self.timed_on:
            parts.append(f"timed on {self.timed_on}, scaled to the whole model")
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
            "timed_on": self.timed_on or "all layers",
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
            timed_on=str(data.get("timed_on", "")),
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
        "timed_on": decision.timed_on,
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
