"""LISTEN for the relays' wake-ups (``outbox_due``), on a connection of its own."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
import psycopg.sql

from outbox.db.store.connections import on_read_only_server

_log = logging.getLogger(__name__)


class Listener:
    """LISTEN on a dedicated connection, re-opened when it breaks.

    A connection pooler in transaction mode (PgBouncer's common setting) takes
    LISTEN without complaint and then drops every notification: the server
    connection that listens is handed to other clients between transactions.
    So each new listening connection is probed with a NOTIFY sent from another
    connection; when the probe never arrives, the listener says so once and the
    caller polls (``wait`` just sleeps its timeout).
    """

    PROBE = "outbox-listen-probe"

    def __init__(self, conninfo: str, channel: str, *, probe_seconds: float = 2.0) -> None:
        self.conninfo = conninfo
        self.channel_name = channel
        self.channel = psycopg.sql.Identifier(channel)
        self.probe_seconds = probe_seconds
        self.conn: psycopg.Connection[Any] | None = None
        self.working: bool | None = None  # None: not probed yet

    def wait(self, timeout: float, stop: threading.Event) -> None:
        if self.working is False:
            stop.wait(timeout)  # notifications cannot arrive here: poll
            return
        try:
            if self.conn is None or self.conn.closed:
                self.conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5)
                self.conn.execute(psycopg.sql.SQL("LISTEN {}").format(self.channel))
                if not self._probe(self.conn):
                    self.working = False
                    self.close()
                    _log.warning(
                        "LISTEN/NOTIFY does not work through this connection (a pooler in "
                        "transaction mode?): polling every %.1fs; set OUTBOX_LISTEN_DATABASE_URL "
                        "to a direct connection to Postgres for immediate wake-ups",
                        timeout,
                    )
                    stop.wait(timeout)
                    return
                self.working = True
            # Short slices so that a stop request is seen within a quarter second.
            deadline = time.monotonic() + timeout
            while not stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0 or list(self.conn.notifies(timeout=min(left, 0.25), stop_after=1)):
                    return
                if on_read_only_server(self.conn):
                    # No longer the primary: nothing is written here, so no
                    # NOTIFY comes. The next wait listens where writes go.
                    _log.debug("LISTEN connection is on a read-only server; reconnecting")
                    self.close()
                    stop.wait(max(0.0, deadline - time.monotonic()))
                    return
        except psycopg.Error as exc:
            # Said at debug level: the relay's round says once that Postgres is down.
            _log.debug("LISTEN connection lost (%s); polling", exc)
            self.close()
            stop.wait(timeout)

    def _probe(self, conn: psycopg.Connection[Any]) -> bool:
        with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5) as other:
            other.execute("SELECT pg_notify(%s, %s)", (self.channel_name, self.PROBE))
        deadline = time.monotonic() + self.probe_seconds
        while (left := deadline - time.monotonic()) > 0:
            for note in conn.notifies(timeout=left, stop_after=1):
                if note.payload == self.PROBE:
                    return True
        return False

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
