"""Failures of our own sending path, and the breaker all worker processes share.

:func:`is_path_failure` tells a reply about our path (the relay or provider
unreachable, our session or account refused) from a reply about this message
or recipient; only the latter is an attempt. :class:`SharedBreaker` keeps the
state of :mod:`outbox.delivery.breaker` in Postgres and a copy in each process,
read again at most every ``refresh`` seconds.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

from outbox.config import Settings
from outbox.db.store import breaker_rows, connections, counts
from outbox.delivery.breaker import BreakerState, Gate, failed, gate, needs_write, succeeded
from outbox.delivery.breaker import take_probe as _take_probe
from outbox.errors import StoreError
from outbox.models import HttpReply, Reply, Stage

log = logging.getLogger(__name__)

Connect = Callable[[], contextlib.AbstractContextManager[connections.Conn]]

# RFC 9110 15.5.2 and 15.5.4: credentials missing or refused, about our account.
_ACCOUNT = frozenset({401, 403})


def is_path_failure(reply: Reply) -> bool:
    """The reply is about our sending path, not about this message or its recipient.

    SMTP: no answer, or a 4yz/5yz, before the transaction (connect, greeting,
    EHLO, STARTTLS, AUTH: refused, reset, timed out, TLS or DNS failure, 421).
    HTTP: the request never reached the provider whole (connect or write
    failed), or the provider answered 5xx, 429, 401/403 or a transient 4xx
    it documents as being about the account. A lost response after the whole
    request left is not: the provider may have accepted it.
    """
    if isinstance(reply, HttpReply):
        if reply.code is None:
            return reply.stage in (Stage.CONNECT, Stage.REQUEST)
        return reply.code >= 500 or reply.code == 429 or reply.code in _ACCOUNT or reply.transient
    if not reply.stage.is_session:
        return False
    # A garbled greeting (smtplib's -1: a reply cut off by the attempt's deadline) too.
    return reply.code is None or not 200 <= reply.code < 400


def describe_failure(reply: Reply) -> str:
    if reply.code is None:
        return f"{reply.error or 'connection lost'} at {reply.stage.value}"
    return f"{reply.code} {reply.text}".strip() + f" at {reply.stage.value}"


def transport_key(settings: Settings) -> str:
    """The breaker's name: the transport, and its failover when one is set."""
    failover = f"+{settings.failover_transport}" if settings.failover_transport else ""
    return f"{settings.transport}{failover}"


class SharedBreaker:
    def __init__(self, settings: Settings, connect: Connect, *, refresh: float = 0.5) -> None:
        self.key = transport_key(settings)
        self.threshold = settings.outage_threshold
        self.probe_seconds = settings.outage_probe_seconds
        self.lease_seconds = settings.attempt_seconds() + 5
        self.connect = connect
        self.refresh = refresh
        self._state = BreakerState(self.key)
        self._db_now = dt.datetime.now(dt.UTC)
        self._read_at = -refresh  # monotonic time of the copy; never read yet
        self._lock = threading.Lock()

    def state(self) -> BreakerState:
        self._fresh()
        return self._state

    def gate(self) -> Gate:
        self._fresh()
        with self._lock:
            now = self._db_now + dt.timedelta(seconds=time.monotonic() - self._read_at)
            return gate(self._state, now)

    def try_probe(self, worker: str) -> bool:
        """Take the one probe lease, if no other process holds it."""

        def take(state: BreakerState, now: dt.datetime) -> BreakerState | None:
            return _take_probe(state, now, worker=worker, lease_seconds=self.lease_seconds)

        try:
            _, after = self._change(take)
        except StoreError:  # the pool's timeout too
            return False
        if after is not None:
            log.debug("probing transport %s (down since %s)", self.key, after.opened_at)
        return after is not None

    def observe(self, worker: str, *, failure: bool, error: str = "") -> None:
        """What the path did for one send; opens or closes the shared breaker."""
        with self._lock:
            if not needs_write(self._state, failure=failure):
                return

        def change(state: BreakerState, now: dt.datetime) -> BreakerState | None:
            if not failure:
                return succeeded(state)
            return failed(
                state,
                now,
                error=error,
                threshold=self.threshold,
                probe_seconds=self.probe_seconds,
                worker=worker,
            )

        try:
            before, after = self._change(change)
        except StoreError as exc:
            log.debug("breaker of %s not updated: %s", self.key, exc)
            return
        if after is None:
            return
        if not before.is_open and after.is_open:
            log.warning(
                "transport %s is down (%d failures in a row, last: %s); rows wait in pending "
                "without spending attempts, one probe every %gs; %s",
                self.key,
                after.failures,
                error,
                self.probe_seconds,
                self._waiting(),
            )
        elif before.is_open and not after.is_open:
            opened = before.opened_at
            took = (dt.datetime.now(dt.UTC) - opened).total_seconds() if opened else 0.0
            log.warning(
                "transport %s is back after %.0fs; sending resumes; %s",
                self.key,
                took,
                self._waiting(),
            )

    def _waiting(self) -> str:
        try:
            with self.connect() as conn:
                unsent = counts.unsent_counts(conn)
        except StoreError:  # the pool's timeout too
            return "rows waiting: unknown"
        shown = ", ".join(f"{n} {p}" for p, n in sorted(unsent.items())) or "none"
        return f"rows waiting: {shown}"

    def _change(
        self, change: Callable[[BreakerState, dt.datetime], BreakerState | None]
    ) -> tuple[BreakerState, BreakerState | None]:
        with self.connect() as conn:
            before, after = breaker_rows.change_breaker(conn, self.key, change)
            connections.commit(conn)
        with self._lock:
            self._state = after if after is not None else before
            # The copy is as fresh as a read; its clock is the database's, roughly.
            self._db_now, self._read_at = dt.datetime.now(dt.UTC), time.monotonic()
        return before, after

    def _fresh(self) -> None:
        if time.monotonic() - self._read_at < self.refresh:
            return
        try:
            with self.connect() as conn:
                state, now = breaker_rows.read_breaker(conn, self.key)
        except StoreError:  # the pool's timeout too
            self._read_at = time.monotonic()  # keep the copy; try again after refresh
            return
        with self._lock:
            self._state, self._db_now, self._read_at = state, now, time.monotonic()
