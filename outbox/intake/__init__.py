"""Intake: writing emails into the outbox inside the caller's transaction.

Validation and the statements are built once, here, whatever the driver:
each call is a *plan* (a generator of :mod:`outbox.db.enqueue_statements` operations)
that an executor of :mod:`outbox.db.executors` or
:mod:`outbox.db.async_executors` runs on the caller's connection, in its
transaction, without committing. So psycopg 3, psycopg2, asyncpg and
SQLAlchemy write the same rows, return the same results and raise the same
errors.

``enqueueing`` holds the four functions :mod:`outbox` exports,
``validation`` checks an email into a row, ``plans`` holds the statements
that write it.
"""

from __future__ import annotations

from outbox.db.row import COLUMNS  # intake.COLUMNS, as before
from outbox.intake.enqueueing import (
    Enqueued,
    enqueue,
    enqueue_async,
    enqueue_many,
    enqueue_many_async,
)

__all__ = ["COLUMNS", "Enqueued", "enqueue", "enqueue_async", "enqueue_many", "enqueue_many_async"]
