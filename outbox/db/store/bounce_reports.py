"""Bounces and providers' reports: stored as they arrive, processed later (the
row each one names, found by VERP id, Message-ID or provider id, is marked
bounced), set aside when processing fails on one."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import orjson
from psycopg.rows import tuple_row

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, translate_errors
from outbox.db.store.texts import storable, storable_text

queries = load_queries(__name__)


def store_bounce(conn: Conn, raw: bytes, envelope_to: str | None) -> int:
    bounce_id = store_report(conn, raw, envelope_to=envelope_to)
    assert bounce_id is not None  # only a provider's event id can repeat
    return bounce_id


def store_report(
    conn: Conn,
    raw: bytes,
    *,
    envelope_to: str | None = None,
    source: str = "mail",
    event_id: str | None = None,
) -> int | None:
    """Keep a bounce or a provider's report; ``None`` if that event was stored before."""
    args = {
        "raw": raw,
        "envelope_to": storable_text(envelope_to),
        "source": source,
        "event_id": storable_text(event_id),
    }
    with translate_errors():
        row = conn.execute(queries["store_bounce"], args).fetchone()
    return int(row[0]) if row else None


@dataclass(frozen=True, slots=True)
class StoredBounce:
    id: int
    envelope_to: str | None
    raw: bytes
    processed_at: dt.datetime | None
    source: str = "mail"  # or the provider whose webhook reported it


def load_bounce(conn: Conn, bounce_id: int) -> StoredBounce | None:
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(queries["load_bounce"], {"id": bounce_id}).fetchone()
    return StoredBounce(row[0], row[1], bytes(row[2]), row[3], row[4]) if row else None


def unprocessed_bounces(conn: Conn, limit: int = 1000) -> list[int]:
    with translate_errors():
        return [r[0] for r in conn.execute(queries["unprocessed_bounces"], {"limit": limit})]


def finish_bounce(
    conn: Conn,
    bounce_id: int,
    *,
    outbox_id: int | None,
    link: str,
    forged: bool,
    results: list[dict[str, Any]],
    error: str | None = None,
) -> None:
    args = {
        "id": bounce_id,
        "outbox_id": outbox_id,
        "link": link,
        "forged": forged,
        "results": orjson.dumps(storable(results)).decode(),
        "error": storable_text(error),
    }
    with translate_errors():
        conn.execute(queries["finish_bounce"], args)


@dataclass(frozen=True, slots=True)
class BouncedRow:
    """What deciding on a report needs of the row it names."""

    id: int
    recipient: str
    copies: frozenset[str]  # its cc and bcc, lower case
    bulk: bool  # a newsletter: it carried List-Unsubscribe


def _bounced_row(row: tuple[Any, ...] | None) -> BouncedRow | None:
    if row is None:
        return None
    copies = frozenset(a.lower() for a in row[2])
    return BouncedRow(int(row[0]), str(row[1]), copies, row[3] != "high")


def find_row_for_bounce(
    conn: Conn, *, outbox_id: int | None, message_id: str | None
) -> BouncedRow | None:
    with translate_errors():
        row = conn.execute(
            queries["find_row_for_bounce"], {"id": outbox_id, "message_id": message_id}
        ).fetchone()
    return _bounced_row(row)


@dataclass(frozen=True, slots=True)
class RowTrace:
    idempotency_key: str
    message_id: str
    template: str
    priority: str
    provider_message_id: str | None
    trace_context: str | None


def bounced_row_trace(conn: Conn, outbox_id: int) -> RowTrace | None:
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(queries["bounced_row_trace"], {"id": outbox_id}).fetchone()
    return RowTrace(*row) if row else None


def find_row_by_provider_id(
    conn: Conn, *, provider: str, provider_message_id: str, bounce_id: int
) -> BouncedRow | None:
    """The row ``provider`` sent under that id, the latest before report ``bounce_id``."""
    args = {
        "provider": provider,
        "provider_message_id": provider_message_id,
        "bounce_id": bounce_id,
    }
    with translate_errors():
        row = conn.execute(queries["find_row_by_provider_id"], args).fetchone()
    return _bounced_row(row)


def mark_bounced(
    conn: Conn, outbox_id: int, *, klass: str, reason: str, bounce_id: int, event: str
) -> None:
    """Record a verdict on its row, and ``event`` (email.bounced...) for the application."""
    args = {
        "id": outbox_id,
        "class": klass,
        "reason": reason,
        "bounce_id": bounce_id,
        "event": event,
    }
    with translate_errors():
        conn.execute(queries["mark_bounced"], args)


def recent_sends_to(conn: Conn, address: str, limit: int) -> list[str | None]:
    """Bounce verdicts of the latest rows sent to ``address``, newest first."""
    with translate_errors():
        rows = conn.execute(queries["recent_sends_to"], {"address": address, "limit": limit})
        return [r[1] for r in rows]


def mark_bounce_unprocessable(conn: Conn, bounce_id: int, reason: str) -> None:
    """Set a report aside that processing fails on: kept, with why, and skipped."""
    args = {"id": bounce_id, "error": storable_text(f"unprocessable: {reason}"[:2000])}
    with translate_errors():
        conn.execute(queries["mark_bounce_unprocessable"], args)


def count_unprocessable_bounces(conn: Conn) -> int:
    with translate_errors():
        row = conn.execute(queries["count_unprocessable_bounces"]).fetchone()
    return int(row[0]) if row else 0
