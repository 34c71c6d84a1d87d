"""The transports' circuit breakers, shared by every worker through one row per
transport: read, changed under a row lock at the database's clock, listed."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.rows import tuple_row

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors
from outbox.delivery.breaker import BreakerState
from outbox.errors import StoreError

queries = load_queries(__name__)


def _breaker(row: Sequence[Any]) -> BreakerState:
    return BreakerState(*row[:8])


def read_breaker(conn: Conn, transport: str) -> tuple[BreakerState, dt.datetime]:
    """A transport's breaker (closed when never written) and the database's clock."""
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(queries["read_breaker"], {"transport": transport}).fetchone()
        if row is None:
            now = cur.execute("SELECT now()").fetchone()
            return BreakerState(transport), now[0] if now else dt.datetime.now(dt.UTC)
    return _breaker(row), row[8]


def change_breaker(
    conn: Conn, transport: str, change: Callable[[BreakerState, dt.datetime], BreakerState | None]
) -> tuple[BreakerState, BreakerState | None]:
    """Apply ``change`` to the locked state at the database's time, in one transaction;
    returns the state before and the one written (None: ``change`` declined)."""
    with translate_errors(), conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(queries["ensure_breaker"], {"transport": transport})
        row = cur.execute(queries["lock_breaker"], {"transport": transport}).fetchone()
        clock = cur.execute("SELECT now()").fetchone()
        if row is None or clock is None:
            raise StoreError(f"breaker of {transport!r} neither created nor found")
        before = _breaker(row)
        after = change(before, clock[0])
        if after is not None and after != before:
            fields = {name: getattr(after, name) for name in after.__slots__}
            cur.execute(queries["save_breaker"], fields)
    return before, after


@dataclass(frozen=True, slots=True)
class BreakerRow:
    state: BreakerState
    changed_seconds_ago: float


def list_breakers(conn: Conn) -> list[BreakerRow]:
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(queries["list_breakers"]).fetchall()
    return [BreakerRow(_breaker(r), float(r[8])) for r in rows]


@dataclass(frozen=True, slots=True)
class LastSend:
    transport: str
    attempted_seconds_ago: float
    sent_seconds_ago: float | None  # None: none of its recent attempts was sent
    verdict: str  # of its last attempt


def last_sends(conn: Conn) -> list[LastSend]:
    """Each transport's latest attempt and send, among the latest attempts."""
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(queries["last_sends"]).fetchall()
    return [
        LastSend(str(t), float(a), None if s is None else float(s), str(v)) for t, a, s, v in rows
    ]
