"""The YouTube Data API units spent per quota day, in a small file in STATE_DIR/youtube.

The API's quota resets at midnight Pacific time, so the ledger's day is that day: a run that
reaches YOUTUBE_DAILY_UNITS stops asking, and the next run on a later Pacific day starts at 0.
Each request is counted before it is sent (a failed request costs units too), and the file is
rewritten atomically after each one, so a crash never under-counts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from kb.core.errors import KbError

PACIFIC = "America/Los_Angeles"  # the API's quota day (read when used: needs tz data)
LEDGER_NAME = "quota.json"


class QuotaReached(KbError):
    """The day's budget is spent: what is left waits for the next run."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class Ledger:
    """Units spent on the current Pacific day, kept in `path` (JSON: day, units)."""

    def __init__(self, path: Path, budget: int, now: Callable[[], datetime] = utc_now) -> None:
        self.path = path
        self.budget = budget
        self.now = now

    def day(self) -> str:
        return self.now().astimezone(ZoneInfo(PACIFIC)).date().isoformat()

    def spent(self) -> int:
        """Units spent today (0 on a new Pacific day, or when the file is missing or unreadable)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return 0
        if not isinstance(data, dict) or data.get("day") != self.day():
            return 0
        units = data.get("units")
        return units if isinstance(units, int) and units >= 0 else 0

    def left(self) -> int:
        return max(0, self.budget - self.spent())

    def spend(self, units: int = 1) -> None:
        """Count `units` about to be spent; QuotaReached (nothing counted) past the budget."""
        spent = self.spent()
        if spent + units > self.budget:
            raise QuotaReached(
                f"YouTube Data API: {spent} of YOUTUBE_DAILY_UNITS={self.budget} units spent on "
                f"{self.day()} (Pacific time); the rest waits for the next run after midnight "
                "Pacific"
            )
        self._write(spent + units)

    def exhaust(self) -> None:
        """The API said its own quota is spent (403 quotaExceeded): nothing more today."""
        self._write(max(self.spent(), self.budget))

    def _write(self, units: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        part = self.path.with_suffix(".tmp")
        part.write_text(json.dumps({"day": self.day(), "units": units}), encoding="utf-8")
        os.replace(part, self.path)
