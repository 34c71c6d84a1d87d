"""Parked rows (failed, dead, held) sent again with a fresh attempt budget: one
by reference or id, or every row a filter selects, in committed batches; the
relays are woken for the priorities requeued."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors

queries = load_queries(__name__)


def requeue(conn: Conn, ref: dict[str, Any]) -> list[str]:
    """Send the parked rows ``ref`` names again; the priorities woken, one per row."""
    with translate_errors():
        rows = conn.execute(queries["requeue_key"], ref).fetchall()
        for priority in sorted({r[1] for r in rows}):
            conn.execute(queries["notify_due"], {"priority": priority})
    return [r[1] for r in rows]


def requeue_row(conn: Conn, outbox_id: int) -> list[str]:
    """:func:`requeue` of exactly the row ``outbox_id`` (the console names rows by id)."""
    return requeue(conn, {"ref": None, "bracketed": None, "row_id": outbox_id})


def requeue_count(conn: Conn, selected: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(status, priority, count) of the parked rows a filter's ``params()`` selects."""
    with translate_errors():
        rows = conn.execute(queries["requeue_count"], selected).fetchall()
    return [(r[0], r[1], int(r[2])) for r in rows]


def requeue_matching(
    conn: Conn,
    selected: dict[str, Any],
    *,
    batch: int = 1000,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Send every parked row a filter's ``params()`` selects again; rows per priority.

    Commits after each batch of ``batch`` rows, so no lock outlives a batch and
    an interrupted run keeps what it did; ``on_batch(done so far)`` follows
    each commit.
    """
    woken: dict[str, int] = {}
    with translate_errors():
        started = conn.execute("SELECT clock_timestamp()").fetchone()
        conn.commit()
        args = {**selected, "started": started[0] if started else None, "limit": batch}
        while True:
            rows = conn.execute(queries["requeue_batch"], args).fetchall()
            for priority in sorted({r[1] for r in rows}):
                conn.execute(queries["notify_due"], {"priority": priority})
                woken[priority] = woken.get(priority, 0) + sum(1 for r in rows if r[1] == priority)
            conn.commit()
            if on_batch is not None and rows:
                on_batch(sum(woken.values()))
            if len(rows) < batch:
                return woken
