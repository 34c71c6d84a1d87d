"""Run intake's statements on the caller's own asynchronous connection.

The asynchronous twins of :mod:`outbox.db.executors`: psycopg 3's
``AsyncConnection``, asyncpg (a connection or a pool's proxy of one), and
SQLAlchemy's ``AsyncConnection`` / ``AsyncSession``. Same statements, same
plan, same errors; only the awaiting differs.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, cast

import psycopg
from psycopg.rows import tuple_row

from outbox.db.enqueue_statements import NUMERIC_DOLLAR, Copy, Op, Plan, Rows, copy_sql, render
from outbox.db.executors import (
    TUPLES_OK,
    UNIQUE_VIOLATION,
    database_of,
    keeps_prepared,
    sqlstate,
)
from outbox.errors import DuplicateKey, StoreError

T = TypeVar("T")

ASYNC_TYPES = (
    "a psycopg AsyncConnection, an asyncpg Connection, "
    "or an SQLAlchemy AsyncConnection or AsyncSession"
)


class AsyncExecutor(Protocol):
    has_copy: bool
    database: object
    prepares: bool  # see outbox.db.executors.Executor

    def transactional(self) -> bool: ...

    async def execute(self, op: Op) -> Rows: ...


async def run(plan: Plan[T], executor: AsyncExecutor) -> T:
    """Drive ``plan`` on ``executor`` (see :func:`outbox.db.executors.run`)."""
    try:
        op = next(plan)
        while True:
            try:
                rows = await executor.execute(op)
            except Exception as exc:  # the plan may undo its savepoint; it re-raises
                op = plan.throw(exc)
            else:
                op = plan.send(rows)
    except StopIteration as done:
        return cast(T, done.value)


class AsyncPsycopgExecutor:
    has_copy = True

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self.database = database_of(conn)
        self.prepares = keeps_prepared(conn)

    def transactional(self) -> bool:
        return not self.conn.autocommit

    async def execute(self, op: Op) -> Rows:
        try:
            async with self.conn.cursor(row_factory=tuple_row) as cur:
                if isinstance(op, Copy):
                    async with cur.copy(copy_sql(op)) as copy:
                        for row in op.rows:
                            await copy.write_row(row)
                    return []
                await cur.execute(op.sql, op.params or None)
                result = cur.pgresult
                return await cur.fetchall() if result and result.status == TUPLES_OK else []
        except psycopg.errors.UniqueViolation as exc:
            raise DuplicateKey(f"database error: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"database error: {exc}") from exc


class AsyncpgExecutor:
    """asyncpg: ``$1`` placeholders, binary COPY by ``copy_records_to_table``.

    asyncpg runs each statement on its own unless the caller opened
    ``conn.transaction()``; then everything here is part of it.
    """

    has_copy = True

    def __init__(self, conn: Any) -> None:
        import asyncpg  # noqa: PLC0415  # optional: only with such a connection

        self.conn = conn
        self.database = database_of(getattr(conn, "_con", None) or conn)  # a pool's proxy
        self.prepares = True  # asyncpg keeps its statements prepared
        self.errors = (asyncpg.PostgresError, asyncpg.InterfaceError)

    def transactional(self) -> bool:
        return bool(self.conn.is_in_transaction())

    async def execute(self, op: Op) -> Rows:
        try:
            if isinstance(op, Copy):
                # Rows are validated as they are listed: a refused one stops here, unsent.
                records = list(op.rows)
                await self.conn.copy_records_to_table(
                    op.table,
                    records=records,
                    columns=list(op.columns),
                    schema_name=op.schema or None,
                )
                return []
            sql, args = render(op, NUMERIC_DOLLAR)
            if not op.returns_rows:
                await self.conn.execute(sql, *args)
                return []
            return [tuple(r) for r in await self.conn.fetch(sql, *args)]
        except self.errors as exc:
            if sqlstate(exc) == UNIQUE_VIOLATION:
                raise DuplicateKey(f"database error: {exc}") from exc
            raise StoreError(f"database error: {exc}") from exc


class AsyncSqlAlchemyExecutor:
    """An SQLAlchemy ``AsyncConnection`` (an ``AsyncSession`` hands over its own)."""

    has_copy = False

    def __init__(self, conn: Any, driver_conn: object) -> None:
        import sqlalchemy.exc  # noqa: PLC0415

        self.conn = conn
        self.style = conn.dialect.paramstyle
        self.database = database_of(driver_conn)
        self.prepares = keeps_prepared(driver_conn)
        self.error = sqlalchemy.exc.DBAPIError

    def transactional(self) -> bool:
        return True

    async def execute(self, op: Op) -> Rows:
        if isinstance(op, Copy):
            raise TypeError("SQLAlchemy takes the multi-row insert, not COPY")
        sql, params = render(op, self.style)
        try:
            result = await self.conn.exec_driver_sql(sql, params or None)
            return [tuple(r) for r in result.fetchall()] if result.returns_rows else []
        except self.error as exc:
            if sqlstate(exc) == UNIQUE_VIOLATION:
                raise DuplicateKey(f"database error: {exc.orig}") from exc
            raise StoreError(f"database error: {exc.orig}") from exc


async def executor_for(conn: object) -> AsyncExecutor:
    """The executor for ``conn``, chosen by its type; TypeError names the accepted ones."""
    if isinstance(conn, psycopg.AsyncConnection):
        return AsyncPsycopgExecutor(conn)
    module = type(conn).__module__
    if module.startswith("asyncpg"):
        import asyncpg  # noqa: PLC0415
        import asyncpg.pool  # noqa: PLC0415

        if isinstance(conn, asyncpg.Connection | asyncpg.pool.PoolConnectionProxy):
            return AsyncpgExecutor(conn)
    if module.startswith("sqlalchemy"):
        from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession  # noqa: PLC0415

        if isinstance(conn, AsyncSession):
            await conn.flush()  # pending objects first: the email may name rows they insert
            conn = await conn.connection()
        if isinstance(conn, AsyncConnection):
            synced = conn.sync_connection  # started: its driver connection is at hand
            if synced is not None and not synced.closed:
                return AsyncSqlAlchemyExecutor(conn, synced.connection.driver_connection)
            raw = await conn.get_raw_connection()
            return AsyncSqlAlchemyExecutor(conn, raw.driver_connection)
    hint = ""
    if isinstance(conn, psycopg.Connection) or module.startswith(("psycopg2", "sqlalchemy")):
        hint = "; for a synchronous connection call enqueue / enqueue_many"
    raise TypeError(f"enqueue_async takes {ASYNC_TYPES}, not {type(conn).__qualname__}{hint}")
