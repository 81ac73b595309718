"""Dashboard sign-ins: the session value the login form puts in the browser's cookie.

Never the token itself. A browser sends 127.0.0.1's cookies to every port of 127.0.0.1, so any
local program the browser visits receives this cookie: what it gets is a random value that the
dashboard pages accept (security.Guard) and nothing else does (`/mcp` and `/ingest` take only
the token), for SESSION_TTL_S at most, until the user signs out, or until this server stops
(sessions live in its memory only).

A sibling module of server.py (this folder is not a package).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable

SESSION_COOKIE = "notes_session"
SESSION_TTL_S = 12 * 3600  # a working day: then the login form again
MAX_SESSIONS = 64  # more sign-ins than that: the oldest session ends


def _key(value: str) -> bytes:
    # held by hash: a dict lookup's timing then says nothing about a valid value
    return hashlib.sha256(value.encode()).digest()


class Sessions:
    """Live sessions by the hash of their value, each with the moment it ends (`clock`, a
    monotonic clock: a change of the wall clock neither ends nor extends one)."""

    def __init__(self, ttl_s: int = SESSION_TTL_S, clock: Callable[[], float] = time.monotonic):
        self.ttl_s = ttl_s
        self.clock = clock
        self._ends: dict[bytes, float] = {}  # insertion order: the oldest first

    def open(self) -> str:
        """A new session's value (URL-safe, 256 random bits)."""
        now = self.clock()
        self._ends = {key: end for key, end in self._ends.items() if end > now}
        while len(self._ends) >= MAX_SESSIONS:
            del self._ends[next(iter(self._ends))]
        value = secrets.token_urlsafe(32)
        self._ends[_key(value)] = now + self.ttl_s
        return value

    def valid(self, value: str) -> bool:
        key = _key(value)
        end = self._ends.get(key)
        if end is None:
            return False
        if self.clock() >= end:
            del self._ends[key]
            return False
        return True

    def close(self, value: str) -> None:
        """Sign out: the value is no longer accepted, from this browser or any copy of it."""
        self._ends.pop(_key(value), None)
