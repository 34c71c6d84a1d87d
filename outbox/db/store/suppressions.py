"""The suppression list: addresses no email is sent to (all mail, or bulk mail
only), added, widened, removed, found and listed."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from psycopg.rows import tuple_row

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors

queries = load_queries(__name__)


@dataclass(frozen=True, slots=True)
class Suppression:
    address: str
    scope: str  # all | bulk
    reason: str
    detail: str | None
    source_bounce_id: int | None
    created_at: dt.datetime


def suppress(
    conn: Conn,
    address: str,
    *,
    reason: str,
    scope: str = "all",
    detail: str | None = None,
    source_bounce_id: int | None = None,
) -> bool:
    """Add (or widen) a suppression; False when the address was already covered."""
    args = {
        "address": address,
        "scope": scope,
        "reason": reason,
        "detail": detail,
        "source_bounce_id": source_bounce_id,
    }
    with translate_errors():
        return conn.execute(queries["suppress"], args).fetchone() is not None


def unsuppress(conn: Conn, address: str) -> bool:
    with translate_errors():
        return conn.execute(queries["unsuppress"], {"address": address}).fetchone() is not None


def find_suppression(conn: Conn, address: str) -> Suppression | None:
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(queries["find_suppression"], {"address": address}).fetchone()
    return Suppression(*row) if row else None


def list_suppressions(conn: Conn, limit: int = 1000) -> list[Suppression]:
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(queries["list_suppressions"], {"limit": limit}).fetchall()
    return [Suppression(*r) for r in rows]
