"""The suite's socket tracer (tests/socket_origins.py): a socket left open names its maker."""

from __future__ import annotations

import gc
import socket
import warnings

from socket_origins import TracedSocket


def made_and_dropped(close: bool) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sock = socket.socket()  # the line an unclosed socket's warning must name
        sock.bind(("127.0.0.1", 0))
        if close:
            sock.close()
        del sock
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def test_every_socket_of_the_suite_is_traced() -> None:
    with socket.socket() as sock:
        assert isinstance(sock, TracedSocket)


def test_a_socket_collected_open_warns_with_the_line_that_made_it_and_is_closed() -> None:
    (message,) = made_and_dropped(close=False)
    assert message.startswith("unclosed <socket_origins.TracedSocket fd=")
    assert "test_socket_origins.py" in message and "sock = socket.socket()" in message


def test_a_closed_socket_is_collected_without_a_warning() -> None:
    assert made_and_dropped(close=True) == []
