"""A socket collected unclosed names where it was made.

The suite turns warnings into errors, so a socket that the garbage collector finds still open
fails the test that happens to be running, whichever test opened it, with only its port to go on
(once in a while, the soak through an embedder restart: laddr only, an ephemeral port). Here
every socket of this process remembers its maker's stack, and the ResourceWarning it raises when
collected open carries that stack; closed sockets behave exactly as before.
"""

from __future__ import annotations

import socket
import traceback
import warnings
from typing import Any

FRAMES = 14  # of the maker's stack: enough to pass the HTTP client or server library's own


class TracedSocket(socket.socket):
    __slots__ = ("_made_at",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._made_at = "".join(traceback.format_stack(limit=FRAMES)[:-1])

    def __del__(self) -> None:
        if self.fileno() == -1:
            return
        message = f"unclosed {self!r}, made at:\n{getattr(self, '_made_at', '?')}"
        self.close()
        warnings.warn(message, ResourceWarning, stacklevel=2)


# Every socket the standard library, asyncio, anyio, httpx and uvicorn make goes through this
# name (socket.create_connection, accept and socketpair look it up when called).
socket.socket = TracedSocket  # type: ignore[misc]
