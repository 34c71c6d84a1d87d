"""The console's sessions (signed in, found by a token's hash, revoked, purged)
and its audit trail of who did what and why."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors
from outbox.db.store.console_reads import NO_CURSOR
from outbox.db.store.texts import storable, storable_text

queries = load_queries(__name__)


def console_audit_add(
    conn: Conn,
    *,
    actor: str,
    role: str,
    action: str,
    target: str | None,
    reason: str,
    detail: dict[str, Any] | None = None,
) -> int:
    args = {
        "actor": actor,
        "role": role,
        "action": action,
        "target": target,
        "reason": storable_text(reason),
        "detail": Jsonb(storable(detail or {})),
    }
    with translate_errors():
        row = conn.execute(queries["console_audit_add"], args).fetchone()
    assert row is not None
    return int(row[0])


def console_audit_list(conn: Conn, *, before: int | None, limit: int = 100) -> list[dict[str, Any]]:
    args = {"before": before or NO_CURSOR, "limit": limit}
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["console_audit_list"], args).fetchall()


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    id: int
    user_name: str
    role: str


def console_session_add(
    conn: Conn, *, token_hash: bytes, user_name: str, role: str, expires_at: dt.datetime
) -> int:
    args = {
        "token_hash": token_hash,
        "user_name": user_name,
        "role": role,
        "expires_at": expires_at,
    }
    with translate_errors():
        row = conn.execute(queries["console_session_add"], args).fetchone()
    assert row is not None
    return int(row[0])


def console_session_find(conn: Conn, token_hash: bytes) -> ConsoleSession | None:
    """The live session of a token's hash (seen now, written at most once a minute)."""
    with translate_errors():
        row = conn.execute(queries["console_session_find"], {"token_hash": token_hash}).fetchone()
    return None if row is None else ConsoleSession(int(row[0]), str(row[1]), str(row[2]))


def console_session_revoke(conn: Conn, token_hash: bytes) -> bool:
    with translate_errors():
        rows = conn.execute(queries["console_session_revoke"], {"token_hash": token_hash})
        return rows.fetchone() is not None


def console_session_revoke_id(conn: Conn, session_id: int) -> tuple[str, str] | None:
    """End a live session by id: its user and role, None when none is live."""
    with translate_errors():
        row = conn.execute(queries["console_session_revoke_id"], {"id": session_id}).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def console_session_list(conn: Conn, *, limit: int = 100) -> list[dict[str, Any]]:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["console_session_list"], {"limit": limit}).fetchall()


def console_session_purge(conn: Conn, *, limit: int = 1000) -> int:
    """Delete up to ``limit`` expired sessions; how many went."""
    with translate_errors():
        return conn.execute(queries["console_session_purge"], {"limit": limit}).rowcount
