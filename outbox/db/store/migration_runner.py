"""``outbox migrate``: the migration files applied in order, and this release's
enqueue function created after them; which migrations are applied; a schema
dropped (the demo's).

What a migration file holds and whether it is safe is read by
:mod:`outbox.db.sql.migration_files`; here it is only run, each statement waiting
at most a short time for its lock so that traffic goes first.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
import psycopg.sql

from outbox.db.enqueue_statements import enqueue_function
from outbox.db.row import COLUMNS
from outbox.db.sql import migrations, qualified, schema
from outbox.db.sql.migration_files import Migration, concurrent_index_name, is_concurrent
from outbox.db.store.connections import Conn, translate_errors
from outbox.errors import StoreError

_log = logging.getLogger(__name__)


# Serialises concurrent `outbox migrate` runs; any constant works.
_MIGRATION_LOCK = 0x0B0C5


@dataclass(frozen=True, slots=True)
class MigrationState:
    version: int
    name: str
    applied_at: dt.datetime | None  # None: pending


def migrate(
    conn: Conn,
    *,
    lock_timeout: float = 0.5,
    retries: int = 60,
    upto: int | None = None,
    on_wait: Callable[[str, int], None] | None = None,
) -> list[str]:
    """Apply the migrations not yet applied (up to ``upto``); the applied ones' labels.

    A statement that needs a lock waits at most ``lock_timeout`` seconds for it:
    a lock request queued behind a long transaction would otherwise hold up
    every enqueue queued behind it. On a timeout the statement (for a
    transactional migration, the whole file) is tried again after a pause,
    ``retries`` times, and ``on_wait(label, try)`` is told. Concurrent runs wait
    for each other (a session advisory lock).
    """
    applied: list[str] = []
    autocommit = conn.autocommit
    with translate_errors():
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.rollback()
        conn.autocommit = True  # each migration (or statement) owns its transaction
        try:
            wait = f"{max(1, int(lock_timeout * 1000))}ms"
            _set_lock_timeout(conn, wait)
            if schema():
                conn.execute(
                    psycopg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                        psycopg.sql.Identifier(schema())
                    )
                )
            _retry_locked(
                conn,
                "outbox_schema_migration",
                lambda: conn.execute(
                    qualified(
                        "CREATE TABLE IF NOT EXISTS outbox_schema_migration ("
                        " version integer PRIMARY KEY, name text NOT NULL,"
                        " applied_at timestamptz NOT NULL DEFAULT now())"
                    ).encode()
                ),
                retries,
                on_wait,
            )
            # One migration run at a time per schema (the schemas' outboxes are apart).
            conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_MIGRATION_LOCK, schema()))
            try:
                done = {
                    v
                    for (v,) in conn.execute(
                        qualified("SELECT version FROM outbox_schema_migration").encode()
                    )
                }
                for migration in migrations():
                    if migration.version in done or (upto is not None and migration.version > upto):
                        continue
                    _apply(conn, migration, wait, retries, on_wait)
                    applied.append(migration.label)
                if upto is None or upto >= migrations()[-1].version:
                    applied += _create_enqueue_function(conn, retries, on_wait)
            finally:
                conn.execute(
                    "SELECT pg_advisory_unlock(%s, hashtext(%s))", (_MIGRATION_LOCK, schema())
                )
                conn.execute("RESET lock_timeout")
        finally:
            if not conn.closed:
                conn.autocommit = autocommit
    return applied


def _apply(
    conn: Conn,
    migration: Migration,
    wait: str,
    retries: int,
    on_wait: Callable[[str, int], None] | None,
) -> None:
    record = (
        qualified("INSERT INTO outbox_schema_migration (version, name) VALUES (%s, %s)").encode(),
        (migration.version, migration.name),
    )
    if migration.transactional:

        def whole_file() -> None:
            with conn.transaction():
                conn.execute(migration.sql.encode("utf-8"))
                conn.execute(*record)

        _retry_locked(conn, migration.label, whole_file, retries, on_wait)
        return
    for statement in migration.statements():
        if is_concurrent(statement):
            _run_concurrently(conn, statement, wait)
        else:
            _retry_locked(
                conn,
                migration.label,
                functools.partial(conn.execute, statement.encode("utf-8")),
                retries,
                on_wait,
            )
    conn.execute(*record)


def _set_lock_timeout(conn: Conn, value: str) -> None:
    conn.execute("SELECT set_config('lock_timeout', %s, false)", (value,))


def _run_concurrently(conn: Conn, statement: str, wait: str) -> None:
    """A CONCURRENTLY build or drop, which lets reads and writes through while it runs.

    It waits for the transactions running when it starts, however long: a
    timeout there would throw a half-built index away for nothing.
    """
    index = concurrent_index_name(statement)
    if index is not None:
        _drop_invalid_index(conn, index)
    _set_lock_timeout(conn, "0")
    try:
        conn.execute(statement.encode("utf-8"))
    finally:
        _set_lock_timeout(conn, wait)


def _drop_invalid_index(conn: Conn, name: str) -> None:
    """Drop ``name`` when an interrupted concurrent build left it INVALID."""
    invalid = conn.execute(
        "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE c.relname = %s"
        " AND c.relnamespace = coalesce(nullif(%s, ''), current_schema())::regnamespace"
        " AND NOT i.indisvalid",
        (name, schema()),
    ).fetchone()
    if invalid:
        _log.warning("index %s was left invalid by an interrupted build: rebuilding it", name)
        conn.execute(qualified(f"DROP INDEX CONCURRENTLY IF EXISTS {name}").encode())


def enqueue_function_present(conn: Conn) -> bool:
    """Whether this release's enqueue function is there. ``migrate`` creates it
    after the migrations (its name is its definition's hash); functions of
    earlier releases stay, for a release still running to call its own."""
    function = enqueue_function(COLUMNS, schema())
    with translate_errors():
        row = conn.execute(function.exists.sql, function.exists.params).fetchone()
    return bool(row and row[0])


def _create_enqueue_function(
    conn: Conn, retries: int, on_wait: Callable[[str, int], None] | None
) -> list[str]:
    """This release's enqueue function, unless it is there: its name, as applied."""
    if enqueue_function_present(conn):
        return []
    function = enqueue_function(COLUMNS, schema())
    create = function.create.encode()
    _retry_locked(conn, "enqueue function", lambda: conn.execute(create), retries, on_wait)
    return [function.name.rsplit(".", 1)[-1]]


def _retry_locked(
    conn: Conn,
    label: str,
    step: Callable[[], object],
    retries: int,
    on_wait: Callable[[str, int], None] | None,
) -> None:
    for attempt in range(1, retries + 2):
        try:
            step()
            return
        except psycopg.errors.LockNotAvailable as exc:
            if attempt > retries:
                raise StoreError(
                    f"migration {label} could not take its lock in {attempt} tries: a long"
                    " transaction holds the table; run `outbox migrate` again when it ends"
                ) from exc
            if on_wait is not None:
                on_wait(label, attempt)
            _log.info("migration %s waits for a lock (try %d): traffic goes first", label, attempt)
            # Short pauses at first, then up to 5 s: traffic's own locks are brief.
            time.sleep(min(5.0, 0.1 * 2 ** min(attempt, 6)))


def migration_status(conn: Conn) -> list[MigrationState]:
    """Every migration, applied (with when) or pending, in order."""
    with translate_errors():
        exists = conn.execute(
            qualified("SELECT to_regclass('outbox_schema_migration') IS NOT NULL").encode()
        ).fetchone()
        applied: dict[int, dt.datetime] = {}
        if exists and exists[0]:
            applied = dict(
                conn.execute(
                    qualified("SELECT version, applied_at FROM outbox_schema_migration").encode()
                ).fetchall()
            )
    return [MigrationState(m.version, m.name, applied.get(m.version)) for m in migrations()]


def drop_schema(conn: Conn, schema: str) -> None:
    """Drop ``schema`` and everything in it."""
    with translate_errors():
        conn.execute(
            psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                psycopg.sql.Identifier(schema)
            )
        )
        conn.commit()
