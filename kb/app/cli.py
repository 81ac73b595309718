"""What every host script does at its edge: settings errors, KbErrors and Ctrl-C become one
`error: ...` line on stderr and an exit code, so every script behaves the same.

    @script
    def main(argv: Sequence[str] | None = None) -> int: ...

Exit codes: 0 ok, 1 a failure the user can fix (or Ctrl-C), 2 invalid settings or arguments.
Every script's files (storage, state) are its user's alone, whatever the umask (kb.core.state).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import ParamSpec

from kb.core.errors import KbError
from kb.core.limits import escaped
from kb.core.state import owner_only

P = ParamSpec("P")


def fail(message: str, code: int = 1) -> int:
    print(f"error: {escaped(message)}", file=sys.stderr)  # it may name a hostile file
    return code


def script(main: Callable[P, int]) -> Callable[P, int]:
    @functools.wraps(main)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> int:
        umask = owner_only()
        try:
            return main(*args, **kwargs)
        except KbError as exc:
            return fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            return fail("interrupted")
        finally:
            os.umask(umask)  # as it was, for a caller in the same process

    return wrapped


def setup_logging(level: str) -> None:
    """Plain lines at `level` (LOG_LEVEL); httpx's line per request only at DEBUG."""
    logging.basicConfig(level=level, format="%(message)s")
    if logging.getLogger().level > logging.DEBUG:
        logging.getLogger("httpx").setLevel(logging.WARNING)
