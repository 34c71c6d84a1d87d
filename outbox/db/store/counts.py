"""How many rows are in which state: per status and priority (all, by tag, by key
prefix), per priority waiting to be sent, per receiver waiting for its rate,
and the oldest unsent row's age."""

from __future__ import annotations

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors

queries = load_queries(__name__)


def status_counts(conn: Conn) -> list[tuple[str, str, int]]:
    with translate_errors():
        return [(r[0], r[1], int(r[2])) for r in conn.execute(queries["status_counts"]).fetchall()]


def paced_pending(conn: Conn) -> dict[str, int]:
    """Pending rows waiting for their receiver's rate, per receiver."""
    with translate_errors():
        return {str(r[0]): int(r[1]) for r in conn.execute(queries["paced_pending"]).fetchall()}


def oldest_unsent(conn: Conn) -> dict[str, float]:
    with translate_errors():
        return {r[0]: float(r[1]) for r in conn.execute(queries["oldest_unsent"]).fetchall()}


def status_counts_by_tag(conn: Conn, tag: str) -> list[tuple[str, str, int]]:
    with translate_errors():
        rows = conn.execute(queries["status_counts_by_tag"], {"tag": tag}).fetchall()
    return [(r[0], r[1], int(r[2])) for r in rows]


def status_counts_by_prefix(conn: Conn, prefix: str) -> list[tuple[str, str, int]]:
    with translate_errors():
        rows = conn.execute(queries["status_counts_by_prefix"], {"prefix": prefix}).fetchall()
    return [(r[0], r[1], int(r[2])) for r in rows]


def unsent_counts(conn: Conn) -> dict[str, int]:
    """Rows waiting to be sent (pending, queued or sending) per priority."""
    with translate_errors():
        return {str(r[0]): int(r[1]) for r in conn.execute(queries["unsent_counts"]).fetchall()}
