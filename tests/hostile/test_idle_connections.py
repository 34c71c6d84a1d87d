"""Slow and idle clients cannot deny `outbox web` to others: 500 connections that
trickle a request and never finish it, re-opened as they are cut off, while
legitimate clients keep asking (real uvicorn, real Postgres)."""

from __future__ import annotations

import contextlib
import dataclasses
import selectors
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from psycopg_pool import ConnectionPool

from outbox.config import Settings
from outbox.web.server import make_server
from tests.keys import SECRET

SLOW_CLIENTS = 500
LEGITIMATE = 50


@contextlib.contextmanager
def serving(settings: Settings) -> Iterator[int]:
    with ConnectionPool(settings.database_url, min_size=1, max_size=4) as pool:
        server = make_server(settings, pool, "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server.server_address[1]
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=15)


class Trickle:
    """``count`` connections from ``peers`` loopback addresses, each sending the
    start of a request and then a header byte a second, never ending it; a
    connection the server closes is opened again at once (as a slowloris does)."""

    def __init__(self, port: int, count: int, peers: list[str]) -> None:
        self.port, self.count, self.peers = port, count, peers
        self.selector = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.reopened = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Trickle:
        for n in range(self.count):
            self._open(self.peers[n % len(self.peers)])
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self.selector.close()

    def _open(self, peer: str) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), 5, (peer, 0))
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        except OSError:
            return  # refused or reset: opened again on the next round
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, peer)

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            for key in list(self.selector.get_map().values()):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    sock.send(b"a")
                    continue
                except BlockingIOError:
                    continue
                except OSError:
                    pass
                self.selector.unregister(sock)
                sock.close()
            # Readable: an answer (a 503, a 431) or the close; either way this
            # connection is done trickling, and another takes its place.
            for key, _ in self.selector.select(timeout=0):
                self.selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
            missing = self.count - len(self.selector.get_map())
            for n in range(missing):
                self.reopened += 1
                self._open(self.peers[n % len(self.peers)])


def legitimate_answers(port: int, spread_seconds: float) -> list[int]:
    """``LEGITIMATE`` requests from 127.0.0.1, each on its own connection, spread
    over ``spread_seconds``: the status of each (0: no answer within 5 s)."""
    statuses = []
    for _ in range(LEGITIMATE):
        try:
            answer = httpx.get(
                f"http://127.0.0.1:{port}/healthz",
                timeout=5,
                headers={"Connection": "close"},
            )
            statuses.append(answer.status_code)
        except httpx.HTTPError:
            statuses.append(0)
        time.sleep(spread_seconds / LEGITIMATE)
    return statuses


@pytest.mark.slow
@pytest.mark.parametrize(
    "peers",
    [["127.0.0.2"], [f"127.0.1.{n}" for n in range(1, 51)], ["127.0.0.1"]],
    ids=["one-peer", "fifty-peers", "the-legitimate-clients-address"],
)
def test_regression_slow_clients_do_not_take_the_slots_of_legitimate_requests(
    settings: Settings, peers: list[str]
) -> None:
    """200 sockets with a partial request line, re-opened every 9 s, made 21 of
    22 legitimate requests answer 503: idle connections counted against
    OUTBOX_WEB_CONCURRENCY. With the defaults (200, 10 s) and 500 of them now."""
    settings = dataclasses.replace(settings, secret=SECRET)
    with serving(settings) as port, Trickle(port, SLOW_CLIENTS, peers):
        time.sleep(1.0)  # all of them connected and trickling
        statuses = legitimate_answers(port, spread_seconds=12.0)  # past a deadline's re-open
    served = statuses.count(200)
    print(f"{served} of {LEGITIMATE} legitimate requests answered 200")
    assert served >= 0.95 * LEGITIMATE, statuses
