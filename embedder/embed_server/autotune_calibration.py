"""int8's calibration (what the fp32 pass saw), kept beside auto's decision so that a later
start loading torch int8 runs no calibration pass."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import torch

from embed_server import int8

log = logging.getLogger("embedder.auto")


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
