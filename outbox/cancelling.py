"""Calling an email off inside the caller's transaction, before any attempt.

Like enqueue, one statement built once and run by the executor of the
caller's connection (:mod:`outbox.db.executors`, :mod:`outbox.db.async_executors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from outbox.db import async_executors, enqueue_statements, executors
from outbox.db.enqueue_statements import Plan
from outbox.fields.cancel_reasons import check_cancellation
from outbox.models import Status
from outbox.validate import check_key


@dataclass(frozen=True, slots=True)
class Cancellation:
    cancelled: bool  # True: this call cancelled it
    status: str | None  # the row's status now; None: no email has this key
    id: int | None = None

    def __bool__(self) -> bool:
        return self.cancelled


def cancel(
    conn: Any,
    idempotency_key: str,
    *,
    reason: str | None = None,
    by: str | None = None,
) -> Cancellation:
    """Cancel the email of ``idempotency_key`` if no worker has taken it yet.

    Runs in ``conn``'s transaction and never commits: the email is cancelled
    exactly when the caller's transaction commits, and its row stays locked
    until then, so a worker that has its id waits and then skips it. Only an
    email still ``pending`` (scheduled or waiting for a retry) or ``queued``
    can be cancelled; otherwise nothing changes and the result says the
    status it has (``sending``, ``sent``, ``cancelled``...). The change is
    recorded in the row's history with ``reason`` (optional) and ``by``
    (default: the connection's ``application_name``, else ``"application"``).
    The key stays
    taken: enqueueing it again returns the cancelled row with ``created=False``.
    ``conn`` is any connection :func:`outbox.enqueue` takes.
    """
    executor = executors.executor_for(conn)
    return executors.run(_plan(idempotency_key, reason, by), executor)


async def cancel_async(
    conn: Any,
    idempotency_key: str,
    *,
    reason: str | None = None,
    by: str | None = None,
) -> Cancellation:
    """:func:`cancel` for asynchronous code (the connections of :func:`outbox.enqueue_async`)."""
    executor = await async_executors.executor_for(conn)
    return await async_executors.run(_plan(idempotency_key, reason, by), executor)


def _plan(idempotency_key: object, reason: object, by: object) -> Plan[Cancellation]:
    key = check_key(idempotency_key)
    checked_reason, checked_by = check_cancellation(reason, by)
    found = yield enqueue_statements.cancel(key, reason=checked_reason, by=checked_by)
    if not found:
        return Cancellation(False, None)
    row_id, before, cancelled = found[0]
    return Cancellation(
        bool(cancelled), Status.CANCELLED.value if cancelled else str(before), int(row_id)
    )
