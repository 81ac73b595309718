"""A child process that serves HTTP: start it, wait until its /health answers, stop it.

The one helper for every such child: `make local`'s embedder and MCP server (kb.app.local_stack),
the benchmarks' embedders and servers (bench/) and the tests' (tests/helpers.py). Its output goes
to a log file when one is given (else it is inherited), so an error can show the log's tail.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

from kb.core.errors import KbError
from kb.core.settings import REPO_ROOT

POLL_S = 0.1
STOP_S = 15.0
LOG_TAIL = 3000  # characters of the child's log an error shows


class ChildError(KbError):
    """A child process exited, or did not answer in time; the message names it."""


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@contextmanager
def terminal_foreground() -> Iterator[None]:
    """Hold the terminal's foreground in a process group of this process's own while inside.

    Ctrl-C then reaches this process alone, not `make` and `uv` above it: make reports any
    recipe it saw interrupted as an error (`make: *** [...] Interrupt`, status 130), even for a
    stop the user asked for that ended with status 0. Ctrl-Z is ignored meanwhile (a stopped
    group the shell does not know of would hang it). Nothing changes without a terminal or in
    the background (`make local &`).
    """
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        yield
        return
    try:
        previous = os.tcgetpgrp(tty)
        if previous != os.getpgrp():
            yield
            return
        if os.getpgrp() != os.getpid():
            os.setpgid(0, 0)
        # tcsetpgrp from a group not (or no longer) in the foreground sends SIGTTOU: ignored
        ttou = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        tstp = signal.signal(signal.SIGTSTP, signal.SIG_IGN)
        os.tcsetpgrp(tty, os.getpgrp())
        try:
            yield
        finally:
            os.tcsetpgrp(tty, previous)
            signal.signal(signal.SIGTSTP, tstp)
            signal.signal(signal.SIGTTOU, ttou)
    finally:
        os.close(tty)


def _message(response: httpx.Response) -> str:
    """The `{"error": {"message"}}` of an answer (the embedder's envelope), else its text."""
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]


class Child:
    """`argv` started from the repository root (the images' WORKDIR holds the same layout).

    `log`: a file for its stdout and stderr (appended to: a restarted child keeps one log).
    `die_with_parent`: on Linux the child gets SIGTERM when this process dies, so a killed
    parent leaves no orphan behind. `own_group`: the child leads a process group of its own, so
    the terminal's Ctrl-C reaches only this process, which stops it once (a second SIGINT makes
    uvicorn skip its shutdown and print tracebacks).
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        log: Path | None = None,
        die_with_parent: bool = False,
        own_group: bool = False,
        cwd: Path = REPO_ROOT,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env) if env is not None else None
        self.log_path = log
        self.cwd = cwd
        self._die_with_parent = die_with_parent
        self._own_group = own_group
        self._log: IO[bytes] | None = None
        self.proc = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        if self.log_path is not None:
            self._log = self.log_path.open("ab")
        return subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT if self._log is not None else None,
            preexec_fn=_die_with_parent if self._die_with_parent else None,
            process_group=0 if self._own_group else None,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        """Everything the child wrote so far ("" without a log file)."""
        if self.log_path is None:
            return ""
        if self._log is not None:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def log_tail(self, chars: int = LOG_TAIL) -> str:
        return self.log_text()[-chars:]

    def _with_log(self, message: str) -> str:
        tail = self.log_tail()
        return f"{message}\n--- {self.name} log ---\n{tail}" if tail else message

    def check_alive(self) -> None:
        """ChildError when the child has exited."""
        if self.proc.poll() is not None:
            where = "" if self.log_path is not None else "; see its output above"
            message = f"the {self.name} exited (status {self.proc.returncode}){where}"
            raise ChildError(self._with_log(message))

    def wait_ready(
        self,
        url: str,
        deadline_s: float,
        *,
        ready: Collection[int] = (200,),
        failed: Collection[int] = (),
        siblings: Sequence[Child] = (),
    ) -> httpx.Response:
        """Poll GET `url` until it answers with a status in `ready` and return that answer.

        ChildError at once when the child (or one of `siblings`, started beside it) exits or
        answers with a status in `failed` (naming its error's message), or after `deadline_s`
        seconds naming the last answer seen (a 503 while a model loads, or no answer at all).
        """
        end = time.monotonic() + deadline_s
        last = "no answer"
        with httpx.Client(timeout=5.0) as http:
            while True:
                for child in (self, *siblings):
                    child.check_alive()
                try:
                    response = http.get(url)
                    if response.status_code in ready:
                        return response
                    if response.status_code in failed:
                        raise ChildError(f"the {self.name} cannot serve: {_message(response)}")
                    last = f"HTTP {response.status_code}: {response.text[:200]}"
                except httpx.TransportError as exc:
                    last = type(exc).__name__
                if time.monotonic() > end:
                    message = f"the {self.name} did not answer at {url} within {deadline_s:.0f} s"
                    raise ChildError(self._with_log(f"{message} ({last})"))
                time.sleep(POLL_S)

    def send(self, signum: int = signal.SIGTERM) -> None:
        """Send `signum` unless the child has exited (SIGINT: as Ctrl-C, a clean shutdown)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signum)

    def wait_stopped(self, timeout: float = STOP_S) -> bool:
        """Wait for the child to exit; kill it after `timeout` seconds. False when killed."""
        try:
            self.proc.wait(timeout=timeout)
            stopped = True
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout)
            stopped = False
        if self._log is not None:
            self._log.close()
            self._log = None
        return stopped

    def stop(self, signum: int = signal.SIGTERM, timeout: float = STOP_S) -> bool:
        """Signal the child, wait for it, kill it if it hangs. False when it had to be killed."""
        self.send(signum)
        return self.wait_stopped(timeout)

    def restart(self) -> None:
        """Stop the child and start the same command again (same log, same environment)."""
        self.stop()
        self.proc = self._spawn()

    def __enter__(self) -> Child:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
