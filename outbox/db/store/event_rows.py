"""Events the status triggers cannot see (migration 0029 writes the others):
an unsubscribe by link changes no row of the outbox."""

from __future__ import annotations

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors

queries = load_queries(__name__)


def record_event(conn: Conn, outbox_id: int, *, type_: str, reason: str) -> None:
    """Record ``type_`` about the email ``outbox_id`` in ``conn``'s transaction."""
    with translate_errors():
        conn.execute(queries["record_event"], {"id": outbox_id, "type": type_, "reason": reason})
