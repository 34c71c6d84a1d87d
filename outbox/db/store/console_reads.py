"""What the console of ``outbox web`` reads for its pages: the overview, email
lists and searches (keyset cursors), one email, templates, suppressions."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any

from psycopg.rows import dict_row, tuple_row

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors
from outbox.db.store.counts import oldest_unsent
from outbox.db.store.suppressions import Suppression

queries = load_queries(__name__)


@dataclass(frozen=True, slots=True)
class EmailFilter:
    """Optional filters of the console's email list (None: any)."""

    status: str | None = None
    priority: str | None = None
    template: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    tag: str | None = None  # one of the email's tags (a scan, like the template filter)


NO_CURSOR = 2**63 - 1  # above every id: the first page of a keyset cursor


def console_overview(conn: Conn) -> dict[str, Any]:
    """Sends per minute of the last hour, and the oldest unsent row's age."""
    with translate_errors():
        minutes = conn.execute(queries["console_sent_per_minute"]).fetchall()
    return {
        "sent_per_minute": {int(m): int(n) for m, n in minutes},
        "oldest_unsent": oldest_unsent(conn),
    }


def console_emails(
    conn: Conn,
    filters: EmailFilter,
    *,
    before: int | None,
    limit: int,
    from_id: int = 0,
) -> list[dict[str, Any]]:
    """Newest first, ids in ``[from_id, before)``, the filters applied."""
    args = {
        **dataclasses.asdict(filters),
        "before": before or NO_CURSOR,
        "from_id": from_id,
        "limit": limit,
    }
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["console_emails"], args, prepare=False).fetchall()


def console_id_range(conn: Conn) -> tuple[int, int] | None:
    with translate_errors():
        row = conn.execute(queries["console_id_range"]).fetchone()
    return None if row is None or row[0] is None else (int(row[0]), int(row[1]))


def console_created_at(conn: Conn, outbox_id: int) -> dt.datetime | None:
    """When the first row from ``outbox_id`` on was enqueued (None: no row from there)."""
    with translate_errors():
        row = conn.execute(queries["console_created_at"], {"id": outbox_id}).fetchone()
    return None if row is None else row[0]


def console_find(conn: Conn, ref: str, *, limit: int = 50) -> list[dict[str, Any]]:
    """Emails whose id, key, Message-ID (bracketed or not) or provider id is ``ref``."""
    bare = ref.strip().removeprefix("<").removesuffix(">")
    args = {
        "ref": ref,
        "bracketed": f"<{bare}>",
        "id": int(ref) if ref.isdigit() and int(ref) < NO_CURSOR else None,
        "limit": limit,
    }
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["console_find"], args, prepare=False).fetchall()


def console_find_to(
    conn: Conn, address: str, *, before: int | None, limit: int
) -> list[dict[str, Any]]:
    args = {"address": address.lower(), "before": before or NO_CURSOR, "limit": limit}
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["console_find_to"], args).fetchall()


def console_email(conn: Conn, outbox_id: int) -> dict[str, Any] | None:
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(queries["console_email"], {"id": outbox_id}).fetchone()


def console_templates(conn: Conn) -> list[str]:
    with translate_errors():
        return [str(r[0]) for r in conn.execute(queries["console_templates"]).fetchall()]


def console_suppressions(
    conn: Conn, *, before: tuple[dt.datetime, str] | None, limit: int = 100
) -> list[Suppression]:
    far = dt.datetime.max.replace(tzinfo=dt.UTC)
    at, address = before or (far, "")
    args = {"before_at": at, "before_address": address, "limit": limit}
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(queries["console_suppressions"], args).fetchall()
    return [Suppression(*r) for r in rows]
