"""What leaves the database: finished emails purged past the retention (one relay
at a time, under :data:`RETENTION_LOCK`), an address forgotten on request,
and the bytes each table takes."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from outbox.db.sql import load_queries, schema
from outbox.db.store.connections import Conn, translate_errors

queries = load_queries(__name__)


@dataclass(frozen=True, slots=True)
class Purged:
    emails: int
    attempts: int
    events: int
    bounces: int


# Serialises the retention of every relay: one of them purges at a time.
RETENTION_LOCK = 0x0B0C6


def purge(
    conn: Conn,
    *,
    before: dt.datetime,
    batch: int = 5000,
    on_batch: Callable[[Purged], None] | None = None,
) -> Purged:
    """Delete finished emails whose last change is older than ``before``.

    Attempts, events and bounce reports go with them; every idempotency key
    stays taken (a tombstone). Each batch of ``batch`` rows is its own
    transaction, so no lock is held long and an interrupted purge keeps what
    it did; ``on_batch(total so far)`` follows each commit.
    """
    total = Purged(0, 0, 0, 0)
    after = 0
    with translate_errors():
        while True:
            row = conn.execute(
                queries["purge_batch"], {"after": after, "before": before, "limit": batch}
            ).fetchone()
            conn.commit()
            emails, last, attempts, events, bounces = row if row else (0, None, 0, 0, 0)
            total = Purged(
                total.emails + emails,
                total.attempts + attempts,
                total.events + events,
                total.bounces + bounces,
            )
            if emails and total.emails == emails:  # the first batch that wrote tombstones
                conn.execute(queries["analyze_tombstones"])
                conn.commit()
            if on_batch is not None and emails:
                on_batch(total)
            # A short batch was the last: nothing older is left (but rows held meanwhile).
            if last is None or emails < batch:
                return total
            after = int(last)


def purge_count(conn: Conn, *, before: dt.datetime) -> int:
    with translate_errors():
        row = conn.execute(queries["purge_count"], {"before": before}).fetchone()
    return int(row[0]) if row else 0


@contextlib.contextmanager
def retention_lock(conn: Conn) -> Iterator[bool]:
    """Whether this session took the retention lock (held for the block)."""
    with translate_errors():
        row = conn.execute(
            queries["retention_lock"], {"lock": RETENTION_LOCK, "schema": schema()}
        ).fetchone()
        conn.commit()
    taken = bool(row and row[0])
    try:
        yield taken
    finally:
        if taken and not conn.closed:
            with translate_errors():
                conn.rollback()
                conn.execute(
                    queries["retention_unlock"], {"lock": RETENTION_LOCK, "schema": schema()}
                )
                conn.commit()


@dataclass(frozen=True, slots=True)
class Forgotten:
    emails: int
    attempts: int
    events: int
    bounces: int
    suppression_kept: bool  # the address was suppressed: its keyed hash still is


def forget(conn: Conn, address: str, *, pattern: str) -> Forgotten:
    """Erase ``address`` from every table; ``pattern`` matches it in texts (a regex)."""
    args = {"address": address, "pattern": pattern}
    with translate_errors():
        ids = [r[0] for r in conn.execute(queries["forget_rows"], args).fetchall()]
        found = conn.execute(queries["forget_history"], {**args, "ids": ids}).fetchone()
        hashed = conn.execute(queries["forget_suppression"], args).fetchone() is not None
        plain = conn.execute(queries["forget_suppression_plain"], args).fetchone() is not None
    attempts, events, bounces = found if found else (0, 0, 0)
    return Forgotten(len(ids), attempts, events, bounces, hashed or plain)


def storage_bytes(conn: Conn) -> dict[str, int]:
    """The bytes each outbox table takes, indexes and TOAST included."""
    with translate_errors():
        return {str(r[0]): int(r[1]) for r in conn.execute(queries["storage_bytes"]).fetchall()}
