"""Sends to a non-blocking socket that keep the interpreter lock, on real sockets."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from outbox.delivery import locked_send


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    sender, receiver = socket.socketpair()
    sender.setblocking(False)
    # A small buffer, so a few kilobytes fill it.
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    try:
        yield sender, receiver
    finally:
        sender.close()
        receiver.close()


def _read(receiver: socket.socket, size: int) -> bytes:
    got = b""
    receiver.settimeout(5)
    while len(got) < size:
        chunk = receiver.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_libc_send_is_used_where_libc_can_be_loaded() -> None:
    if sys.platform.startswith("linux"):
        assert locked_send._send is not None


def test_a_send_the_kernel_has_room_for_is_taken_whole(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    sender, receiver = pair
    assert locked_send.send_once(sender, b"*1\r\n$4\r\nPING\r\n") == 14
    assert _read(receiver, 14) == b"*1\r\n$4\r\nPING\r\n"


def test_a_full_buffer_takes_nothing_and_says_so(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    sender, _ = pair
    while locked_send.send_once(sender, b"x" * 4096):
        pass  # the peer reads nothing: the buffer fills
    assert locked_send.send_once(sender, b"y") == 0


def test_send_all_waits_for_room_and_keeps_the_order(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    sender, receiver = pair
    data = bytes(range(256)) * 2000  # far more than the buffers hold
    got: list[bytes] = []

    def slow_reader() -> None:
        time.sleep(0.2)  # the sender finds the buffer full meanwhile
        got.append(_read(receiver, len(data)))

    reader = threading.Thread(target=slow_reader)
    reader.start()
    locked_send.send_all(sender, data, timeout=5)
    reader.join(10)
    assert got == [data]


def test_a_peer_that_takes_nothing_times_out(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    sender, _ = pair
    with pytest.raises(TimeoutError, match="took nothing"):
        locked_send.send_all(sender, b"z" * 1_000_000, timeout=0.3)


def test_a_closed_peer_is_an_os_error(pair: tuple[socket.socket, socket.socket]) -> None:
    sender, receiver = pair
    receiver.close()
    with pytest.raises(OSError) as raised:
        locked_send.send_all(sender, b"after the peer left", timeout=1)
    assert not isinstance(raised.value, TimeoutError)


def test_a_closed_socket_is_an_os_error(pair: tuple[socket.socket, socket.socket]) -> None:
    sender, _ = pair
    sender.close()
    with pytest.raises(OSError):
        locked_send.send_once(sender, b"to nowhere")
