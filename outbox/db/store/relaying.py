"""The relay's rows: due rows claimed for publishing, the rows in flight
(backpressure), when the next row falls due, and the sweep of rows lost by
the broker or by a silent worker process."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors

queries = load_queries(__name__)


def count_in_flight(conn: Conn, priority: str) -> int:
    with translate_errors():
        row = conn.execute(queries["count_in_flight"], {"priority": priority}).fetchone()
    return int(row[0]) if row else 0


def seconds_to_next_due(conn: Conn, priority: str) -> float | None:
    with translate_errors():
        row = conn.execute(queries["seconds_to_next_due"], {"priority": priority}).fetchone()
    return None if row is None or row[0] is None else float(row[0])


# Not frozen: one is built per row claimed (see sending.OutboxRow).
@dataclass(slots=True)
class Claimed:
    id: int
    trace_context: str | None


def claim_due(conn: Conn, *, priority: str, limit: int, relay: str) -> list[Claimed]:
    args = {"priority": priority, "limit": limit, "relay": relay}
    with translate_errors():
        return [Claimed(r[0], r[1]) for r in conn.execute(queries["claim_due"], args).fetchall()]


@dataclass(frozen=True, slots=True)
class Swept:
    requeued: int  # queued rows whose broker message was lost
    uncertain: dict[str, int]  # sending rows of a silent worker process, by new status


def sweep(
    conn: Conn,
    *,
    stuck_seconds: float,
    max_attempts: int,
    hold: bool,
    lost: Collection[int] = (),
    sending: bool = True,
    limit: int = 10_000,
) -> Swept:
    """Return lost rows: the ``queued`` rows of ``lost`` (found by :func:`queued_ids`,
    then not held by the broker), and the ``sending`` rows of worker processes
    silent for ``stuck_seconds`` (unless ``sending`` is False: the caller cannot
    yet tell a silent process from one that could not reach the database)."""
    args = {
        "stuck_seconds": stuck_seconds,
        "max_attempts": max_attempts,
        "hold": hold,
        "limit": limit,
        "lost": sorted(lost),
    }
    queued: list[Any] = []
    stuck: list[Any] = []
    with translate_errors():
        if lost:
            queued = conn.execute(queries["sweep_queued"], args).fetchall()
        if sending:
            stuck = conn.execute(queries["sweep_sending"], args).fetchall()
    by_status: dict[str, int] = {}
    for _, status in stuck:
        by_status[status] = by_status.get(status, 0) + 1
    return Swept(len(queued), by_status)


def sweep_orphans(
    conn: Conn,
    process: str,
    held: Collection[int],
    *,
    stuck_seconds: float,
    max_attempts: int,
    hold: bool,
) -> dict[int, str]:
    """Return the rows this live ``process`` has locked for ``stuck_seconds`` and
    none of its threads holds, as uncertain attempts; their new status by id."""
    args = {
        "process": process,
        "held": sorted(held),
        "stuck_seconds": stuck_seconds,
        "max_attempts": max_attempts,
        "hold": hold,
    }
    with translate_errors():
        rows = conn.execute(queries["sweep_orphans"], args).fetchall()
    return {int(r[0]): str(r[1]) for r in rows}


def queued_ids(
    conn: Conn, *, priorities: Collection[str], lost_after: float, limit: int = 10_000
) -> list[int]:
    """Queued rows of ``priorities`` published over ``lost_after`` seconds ago."""
    args = {"priorities": list(priorities), "lost_after": lost_after, "limit": limit}
    with translate_errors():
        rows = conn.execute(queries["queued_ids"], args)
        return [int(r[0]) for r in rows]


def return_dead_lettered(conn: Conn, ids: Collection[int]) -> int:
    """Put the queued rows among ``ids`` back to pending (their message was
    dead-lettered); how many went back."""
    if not ids:
        return 0
    with translate_errors():
        return len(conn.execute(queries["return_dead_lettered"], {"ids": sorted(ids)}).fetchall())
