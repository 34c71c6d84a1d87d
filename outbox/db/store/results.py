"""Results recorded: each attempt and the state its row takes, several
workers' in one statement; rows handed back without an attempt; after a
commit whose answer was lost, which rows are still held. A recipient refused
as non-existent is suppressed with its result."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from outbox.db.sql import load_queries
from outbox.db.store.connections import Conn, id_array, translate_errors
from outbox.db.store.texts import storable_text

queries = load_queries(__name__)


# Not frozen: one is built per attempt (see OutboxRow).
@dataclass(slots=True)
class AttemptRecord:
    """One attempt and the row state it leads to (a row of record_results)."""

    id: int
    attempt: int
    status: str
    reason: str
    delay_seconds: float
    provider_message_id: str | None
    verdict: str
    stage: str | None
    reply_code: int | None
    enhanced_status: str | None
    reply_text: str | None
    duration_ms: float
    transport: str | None = None  # the transport that carried it (smtp, postmark...)
    suppress: bool = False  # refused at RCPT TO as non-existent: suppress the recipient
    # With cc or bcc, each recipient's reply: {"address", "kind", "code", "text"}.
    recipients: list[dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class Unattempted:
    """A row handed back without an attempt (its send never reached a verdict)."""

    id: int
    worker: str
    reason: str
    delay_seconds: float


def record_results(conn: Conn, results: Sequence[tuple[str, AttemptRecord]]) -> set[int]:
    """Store (worker, attempt) pairs and their rows' new states; the ids whose rows
    were still the worker's. Recipients refused at RCPT TO are suppressed in the
    same transaction (an autocommit connection gets one only then)."""
    rows = [_result_row(worker, record) for worker, record in results]
    payload = {"results": orjson.dumps(rows).decode(), "ids": id_array(r.id for _, r in results)}
    refused = any(record.suppress for _, record in results)
    together = conn.transaction() if refused else contextlib.nullcontext()
    with translate_errors(), together:
        found = conn.execute(queries["record_results"], payload).fetchall()
        if refused:
            conn.execute(queries["suppress_refused"], payload)
    return {r[0] for r in found}


def _result_row(worker: str, record: AttemptRecord) -> dict[str, Any]:
    """One result as record_results reads it: the worker holding its row and the
    attempt's fields, its texts made storable."""
    stored = storable_attempt(record)
    row = {field: getattr(stored, field) for field in _ATTEMPT_FIELDS}
    row["worker"] = worker
    return row


_ATTEMPT_FIELDS = tuple(f.name for f in dataclasses.fields(AttemptRecord))


def still_held(conn: Conn, rows: Sequence[tuple[int, str]]) -> set[int]:
    """Of (id, worker) pairs, the ids still ``sending`` under that worker: after a
    write whose commit went unanswered, what it did not record."""
    payload = orjson.dumps([{"id": i, "worker": w} for i, w in rows]).decode()
    with translate_errors():
        found = conn.execute(queries["still_held"], {"rows": payload}).fetchall()
    return {int(r[0]) for r in found}


def return_unattempted(
    conn: Conn, rows: Sequence[Unattempted], *, max_age_seconds: float
) -> dict[int, str]:
    """Hand rows back without an attempt; the status each one took (pending, or dead
    past the age limit), by id. A row no longer held by its worker is left out."""
    payload = orjson.dumps(list(rows)).decode()  # orjson writes dataclasses natively
    ids = id_array(r.id for r in rows)
    args = {"rows": payload, "ids": ids, "max_age_seconds": max_age_seconds}
    with translate_errors():
        found = conn.execute(queries["return_unattempted"], args).fetchall()
    return {int(r[0]): str(r[1]) for r in found}


def storable_attempt(record: AttemptRecord) -> AttemptRecord:
    """``record`` with its texts as Postgres can hold them (itself when they are)."""
    texts = (record.reason, record.reply_text, record.provider_message_id)
    reason, reply_text, provider_message_id = stored = tuple(storable_text(t) for t in texts)
    if stored == texts:
        return record  # nearly every reply: no copy of the record
    return dataclasses.replace(
        record,
        reason=reason or "",
        reply_text=reply_text,
        provider_message_id=provider_message_id,
    )
