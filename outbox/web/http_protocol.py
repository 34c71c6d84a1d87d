"""`outbox web`'s HTTP/1.1 connections: uvicorn's httptools protocol (llhttp's
C parser, which costs a request a fraction of what h11 in Python does) with
deadlines for reading each request, a bound on its request line and headers,
and a place in the server's :class:`~outbox.web.connection_limits.ConnectionBook`.

uvicorn times out idle keep-alive connections but not a request that arrives a
byte every few seconds: such a client holds no thread here, yet would hold a
connection for ever. Its request head (the request line and headers) must
arrive within ``head_timeout`` seconds of the connection (or of the previous
response), and the whole request within ``request_timeout``, or the connection
is closed. Headers that never end are cut at ``max_head_bytes`` with a 431, as
h11's limit did. At the book's bounds the connection that has waited longest
for its request head is closed for the new one; none waiting, the new one is
answered 503 and closed.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from outbox.web.connection_limits import ConnectionBook

# The request line and headers of one request, at most (what h11 allowed here).
MAX_HEAD_BYTES = 16 * 1024
# A client sends its request head in one packet or a few: seconds to send it.
HEAD_SECONDS = 5.0
_LINGER_SECONDS = 2.0  # a refused client's last bytes are read this long
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class BoundedHttp(HttpToolsProtocol):
    """One connection; a subclass per server sets the class attributes below
    (:func:`protocol_for`)."""

    request_timeout: ClassVar[float] = 10.0
    head_timeout: ClassVar[float] = HEAD_SECONDS
    max_head_bytes: ClassVar[int] = MAX_HEAD_BYTES
    book: ClassVar[ConnectionBook[BoundedHttp]]
    _deadline: asyncio.TimerHandle | None = None
    _started = 0.0  # loop time the request being read began to be awaited
    _head_bytes = 0  # of the request being read, until its headers are complete
    _in_head = True
    _began = False  # a request began in the chunk being parsed
    _refused = False  # answered 431 or 503: what comes next is dropped

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _no_delay(transport)
        admitted, evicted = self.book.admit(self, self.client[0] if self.client else "")
        if evicted is not None:
            evicted.give_way()
        if not admitted:
            self.book.leave(self)
            self._refuse(_BUSY)
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # read and dropped until the client hangs up: see _refuse
        was_in_head, self._began = self._in_head, False
        super().data_received(data)
        # A chunk that neither began a request nor ended its headers was all head
        # (a chunk that began one may hold the end of the previous body: not counted).
        if self._in_head and was_in_head and not self._began:
            self._head_bytes += len(data)
            if self._head_bytes > self.max_head_bytes:
                self._refuse(
                    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n"
                    b"connection: close\r\n\r\n"
                )

    def on_message_begin(self) -> None:
        self._in_head, self._began, self._head_bytes = True, True, 0
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._in_head = False
        self.book.head_complete(self)
        # The body has what is left of the whole request's time.
        self._schedule(self._started + self.request_timeout - self.loop.time())
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()  # the request is in; the app's time is not the client's

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline:
            self.book.waiting(self)
            self._arm()  # the next request on this connection gets the same deadlines

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.book.leave(self)
        super().connection_lost(exc)

    def give_way(self) -> None:
        """Closed for a newer connection, as the deadline would close it: it has
        been waiting longest for a request head."""
        self._disarm()
        self.book.leave(self)
        if not self.transport.is_closing():
            self.transport.close()

    def _refuse(self, answer: bytes) -> None:
        """Answer and end the connection. Closing a socket with unread bytes
        resets it, and a reset loses the answer still on its way: the answer
        goes, then our side is shut, and what the client still sends is read
        and dropped until it hangs up or ``_LINGER_SECONDS`` pass."""
        self._disarm()
        if self._refused:
            return
        self._refused = True
        if not self.transport.is_closing():
            self.transport.write(answer)
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self.loop.call_later(_LINGER_SECONDS, self.transport.close)

    def _arm(self) -> None:
        self._started = self.loop.time()
        self._schedule(min(self.head_timeout, self.request_timeout))

    def _schedule(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(max(seconds, 0.0), self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def protocol_for(*, request_timeout: float, per_peer: int, total: int) -> type[BoundedHttp]:
    """The protocol class of one server: its deadlines and its own book."""
    attributes: dict[str, Any] = {
        "request_timeout": request_timeout,
        "book": ConnectionBook[BoundedHttp](per_peer=per_peer, total=total),
    }
    return type("ServerHttp", (BoundedHttp,), attributes)


def _no_delay(transport: asyncio.Transport) -> None:
    """Send each write at once. A response goes out as headers then body; with
    Nagle's algorithm the body waits for the ACK of the headers, which the
    client delays by 40 ms on a keep-alive connection."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
