"""Operators' look-ups: emails found by reference (key, Message-ID, id, provider
id) or by recipient, each one's attempts, events and reports; an email as the
HTTP API shows it; the recipient an unsubscribe link names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg.rows import dict_row

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors

queries = load_queries(__name__)


def find_messages(conn: Conn, ref: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows ``ref`` (:func:`outbox.cli_input.email_ref`) names, oldest first."""
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["find_message"], ref).fetchall()


def list_attempts(conn: Conn, outbox_id: int) -> list[dict[str, Any]]:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["list_attempts"], {"id": outbox_id}).fetchall()


def list_events(conn: Conn, outbox_id: int) -> list[dict[str, Any]]:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["list_events"], {"id": outbox_id}).fetchall()


def list_bounces(conn: Conn, outbox_id: int) -> list[dict[str, Any]]:
    """Reports about one row; their results without the recipient (who is the row's)."""
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(queries["list_bounces"], {"id": outbox_id}).fetchall()
    for row in rows:
        row["results"] = [
            {k: v for k, v in result.items() if k in ("class", "status", "reason")}
            for result in row["results"] or []
        ]
    return rows


def sent_by_prefix(conn: Conn, prefix: str) -> list[dict[str, Any]]:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["sent_by_prefix"], {"prefix": prefix}).fetchall()


def unsubscribe_recipient(conn: Conn, outbox_id: int) -> str | None:
    with translate_errors():
        row = conn.execute(queries["unsubscribe_recipient"], {"id": outbox_id}).fetchone()
    return None if row is None else str(row[0])


def find_messages_to(conn: Conn, address: str, limit: int = 20) -> list[dict[str, Any]]:
    """The latest ``limit`` emails to ``address``, newest first."""
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            queries["find_messages_to"], {"address": address, "limit": limit}
        ).fetchall()


def api_email(
    conn: Conn,
    *,
    visible: Mapping[str, Any],
    id_: int | None = None,
    key: str | None = None,
) -> dict[str, Any] | None:
    """The email of an id or a stored key, if ``visible``
    (:meth:`outbox.web.owners.Owner.visible`) reaches it."""
    args = {**visible, "id": id_, "key": key}
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["api_email"], args).fetchone()
