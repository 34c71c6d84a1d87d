"""What a worker reads and writes to send: it takes published rows
(:class:`OutboxRow`), reads their attachments and template versions, and hands
back the rows it may not or did not try."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.rows import tuple_row

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, id_array, translate_errors

queries = load_queries(__name__)


# Not frozen: one is built per row taken, and a frozen dataclass's __init__,
# which sets each field through object.__setattr__, costs ten times as much.
@dataclass(slots=True)
class OutboxRow:
    id: int
    idempotency_key: str
    recipient: str
    template: str
    params: dict[str, Any]
    message_id: str
    priority: str
    attempts: int
    created_at: dt.datetime
    age_from: dt.datetime
    template_version: str | None = None  # None: enqueued before versions were recorded
    trace_context: str | None = None  # the business event's traceparent
    sender: str | None = None  # From, fixed at enqueue; None: enqueued before it was recorded
    reply_to: Sequence[str] = ()  # Reply-To mailboxes, fixed at enqueue
    subject: str | None = None  # inline content (template '(inline)'); None for templates
    body_text: str | None = None
    body_html: str | None = None
    headers: Sequence[Sequence[str]] = ()  # the caller's own headers, [name, value] pairs
    tags: Sequence[str] = ()
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    cc: Sequence[str] = ()  # more recipients, in the Cc header
    bcc: Sequence[str] = ()  # more recipients, in no header (RCPT TO only)
    locale: str | None = None  # the template's language folder; None: its default files
    # Files given by content: [{"sha256", "filename", "content_type", "size"}].
    attachments: Sequence[dict[str, Any]] = ()


def load_attachments(conn: Conn, hashes: Sequence[str]) -> dict[str, bytes]:
    with translate_errors():
        rows = conn.execute(queries["load_attachment_blobs"], {"hashes": list(hashes)}).fetchall()
    return {str(r[0]): bytes(r[1]) for r in rows}


def take_for_sending(conn: Conn, ids: Sequence[int], worker: str) -> list[OutboxRow]:
    args = {"ids": id_array(ids), "worker": worker}
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(queries["lock_published"], args)
        # A new statement, a new snapshot: the relay's commit is visible now.
        rows = cur.execute(queries["take_for_sending"], args).fetchall()
    return [OutboxRow(*r) for r in rows]


def taken_by(conn: Conn, ids: Sequence[int], worker: str) -> list[OutboxRow]:
    """The rows of ``ids`` that ``worker`` holds ``sending``: what a take whose
    commit went unanswered did take."""
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(queries["taken_by"], {"ids": id_array(ids), "worker": worker}).fetchall()
    return [OutboxRow(*r) for r in rows]


def release_unattempted(conn: Conn, ids: Sequence[int], worker: str, reason: str) -> None:
    args = {"ids": id_array(ids), "worker": worker, "reason": reason}
    with translate_errors():
        conn.execute(queries["release_unattempted"], args)


@dataclass(frozen=True, slots=True)
class Deferral:
    id: int
    delay_seconds: float
    reason: str


def defer_paced(conn: Conn, deferrals: Sequence[Deferral], worker: str) -> None:
    args = {
        "ids": [d.id for d in deferrals],
        "delays": [d.delay_seconds for d in deferrals],
        "reasons": [d.reason for d in deferrals],
        "worker": worker,
    }
    with translate_errors():
        conn.execute(queries["defer_paced"], args)


def find_template_version(conn: Conn, version: str) -> tuple[Any, ...] | None:
    """(files, compiled_html, compiled_text, name) of a stored version, if any."""
    with translate_errors():
        row = conn.execute(queries["find_template_version"], {"hash": version}).fetchone()
    return None if row is None else tuple(row)
