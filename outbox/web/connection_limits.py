"""How many connections and requests `outbox web` holds at once, and whose.

A connection costs the event loop a socket and a few kilobytes, no thread;
a request costs a worker thread and maybe a database connection. So the two
are bounded apart: :class:`RequestLimit` answers 503 past
``OUTBOX_WEB_CONCURRENCY`` requests being served, whatever the number of
connections, and :class:`ConnectionBook` bounds the connections, per peer
address (``OUTBOX_WEB_PEER_CONNECTIONS``) and in all (``OUTBOX_WEB_CONNECTIONS``).
At a bound, the connection that has waited longest without a whole request
head is closed for the new one (at the peer's bound, one of that peer's): a
slow or idle client gives way, a client that sends its request at once never
waits behind one.

Everything here runs on the event loop's one thread: no locks.
"""

from __future__ import annotations

import resource
from collections import Counter
from typing import Generic, TypeVar

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.flow_control import service_unavailable

C = TypeVar("C")

# File descriptors kept for everything but client connections: the database
# pool, the listening socket, log files, the threads' own.
_RESERVED_FILES = 128


def connection_ceiling(wanted: int) -> int:
    """``wanted`` connections, or fewer when the process may not open that many
    files: a server out of file descriptors stops accepting anyone, where one
    at its ceiling makes a waiting connection give way."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - _RESERVED_FILES))


class ConnectionBook(Generic[C]):
    """The connections held, by peer, and which of them wait for a request
    head, oldest first (pure: the caller closes what it is told to)."""

    def __init__(self, *, per_peer: int, total: int) -> None:
        self.per_peer = per_peer
        self.total = total
        self._peers: dict[C, str] = {}
        self._by_peer: Counter[str] = Counter()
        # Insertion-ordered, the oldest first: in all, and per peer.
        self._waiting: dict[C, None] = {}
        self._peer_waiting: dict[str, dict[C, None]] = {}

    def __len__(self) -> int:
        return len(self._peers)

    def admit(self, conn: C, peer: str) -> tuple[bool, C | None]:
        """Whether ``conn`` may stay, and a connection to close to make room:
        at the peer's bound, that peer's longest waiting connection (a client
        pushes out only its own); at the total, anyone's. None waiting: refused."""
        if self._by_peer[peer] >= self.per_peer:
            evicted = next(iter(self._peer_waiting.get(peer, ())), None)
        elif len(self._peers) >= self.total:
            evicted = next(iter(self._waiting), None)
        else:
            evicted = None
            self._add(conn, peer)
            return True, None
        if evicted is None:
            return False, None  # every connection is in a request: none gives way
        self.leave(evicted)
        self._add(conn, peer)
        return True, evicted

    def head_complete(self, conn: C) -> None:
        """``conn`` sent a whole request head: it is being served, not waiting."""
        self._waiting.pop(conn, None)
        peer = self._peers.get(conn)
        if peer is not None:
            self._peer_waiting[peer].pop(conn, None)

    def waiting(self, conn: C) -> None:
        """``conn`` was answered and waits for its next request (kept alive)."""
        peer = self._peers.get(conn)
        if peer is not None:
            self.head_complete(conn)
            self._waiting[conn] = None  # the newest waiter now
            self._peer_waiting[peer][conn] = None

    def leave(self, conn: C) -> None:
        peer = self._peers.pop(conn, None)
        if peer is None:
            return
        self._waiting.pop(conn, None)
        self._peer_waiting[peer].pop(conn, None)
        self._by_peer[peer] -= 1
        if self._by_peer[peer] <= 0:
            del self._by_peer[peer]
            del self._peer_waiting[peer]

    def held_by(self, peer: str) -> int:
        return self._by_peer[peer]

    def _add(self, conn: C, peer: str) -> None:
        self._peers[conn] = peer
        self._by_peer[peer] += 1
        self._waiting[conn] = None
        self._peer_waiting.setdefault(peer, {})[conn] = None


class RequestLimit:
    """An immediate 503 past ``limit`` requests being served at once (from their
    complete head to their answer). Connections waiting for a request, however
    many, take no part: uvicorn's own ``limit_concurrency`` counts those too,
    which let idle sockets turn every real request away."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.active = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.active >= self.limit:
            await service_unavailable(scope, receive, send)  # type: ignore[arg-type]
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
