"""Run intake's statements on the caller's own synchronous connection.

Each executor takes the connection an application already has (psycopg 3,
psycopg2, an SQLAlchemy ``Connection`` or ``Session``, Django's), runs the neutral
statements of :mod:`outbox.db.enqueue_statements` in that connection's current
transaction and never commits. Driver errors become
:class:`~outbox.errors.StoreError` here, a unique violation
:class:`~outbox.errors.DuplicateKey`. Drivers other than psycopg 3 are
optional and imported only when a connection of theirs arrives.

Like :mod:`outbox.db.store`, these modules talk to Postgres; they hold no SQL
of their own.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, cast

import psycopg
from psycopg.pq import ExecStatus
from psycopg.rows import tuple_row

from outbox.db.enqueue_statements import Copy, Op, Plan, Rows, copy_sql, render
from outbox.errors import DuplicateKey, StoreError

T = TypeVar("T")
UNIQUE_VIOLATION = "23505"
TUPLES_OK = ExecStatus.TUPLES_OK

SYNC_TYPES = "a psycopg Connection, a psycopg2 connection, or an SQLAlchemy Connection or Session"


class Executor(Protocol):
    has_copy: bool
    database: object  # names the database, for the template version cache
    # Whether the driver keeps statements prepared, so Postgres plans each once
    # per session; else enqueue calls a function, whose plan Postgres keeps.
    prepares: bool

    def transactional(self) -> bool:
        """Whether statements run in a transaction the caller ends (not autocommit)."""

    def execute(self, op: Op) -> Rows: ...


def run(plan: Plan[T], executor: Executor) -> T:
    """Drive ``plan`` on ``executor``: each operation's rows (or error) go back into it."""
    try:
        op = next(plan)
        while True:
            try:
                rows = executor.execute(op)
            except Exception as exc:  # the plan may undo its savepoint; it re-raises
                op = plan.throw(exc)
            else:
                op = plan.send(rows)
    except StopIteration as done:
        return cast(T, done.value)


def database_of(driver_conn: object) -> object:
    """What names the database of a driver's connection, read without a round trip.

    psycopg (sync or async) and psycopg2 say host, port and database; for any
    other driver the connection object itself stands for its database.
    """
    if isinstance(driver_conn, psycopg.Connection | psycopg.AsyncConnection):
        pg = driver_conn.pgconn
        return ("libpq", pg.host, pg.port, pg.db)
    if type(driver_conn).__module__.startswith("psycopg2"):
        info = driver_conn.info  # type: ignore[attr-defined]
        return ("libpq", info.host.encode(), str(info.port).encode(), info.dbname.encode())
    return driver_conn


def keeps_prepared(driver_conn: object) -> bool:
    """Whether statements on this driver connection are prepared once and reused.

    psycopg 3 prepares a statement run a few times, unless told not to (behind
    PgBouncer) or binding client-side (``ClientCursor``, Django's default);
    asyncpg keeps a cache of prepared statements; psycopg2 sends text only.
    """
    if isinstance(driver_conn, psycopg.Connection | psycopg.AsyncConnection):
        client_side = issubclass(
            driver_conn.cursor_factory, psycopg.ClientCursor | psycopg.AsyncClientCursor
        )
        return driver_conn.prepare_threshold is not None and not client_side
    return type(driver_conn).__module__.startswith("asyncpg")


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a driver error, through SQLAlchemy's wrapping if any."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            break
        code = getattr(seen, "sqlstate", None) or getattr(seen, "pgcode", None)
        if isinstance(code, str):
            return code
        seen = getattr(seen, "orig", None) or seen.__cause__
    return None


class PsycopgExecutor:
    has_copy = True

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.database = database_of(conn)
        self.prepares = keeps_prepared(conn)

    def transactional(self) -> bool:
        return not self.conn.autocommit

    def execute(self, op: Op) -> Rows:
        try:
            with self.conn.cursor(row_factory=tuple_row) as cur:
                if isinstance(op, Copy):
                    with cur.copy(copy_sql(op)) as copy:
                        for row in op.rows:
                            copy.write_row(row)
                    return []
                # The SQL comes from enqueue_statements.sql, its column lists from intake's row.
                cur.execute(op.sql, op.params or None)
                # The result's status, not cur.description: that builds column objects.
                result = cur.pgresult
                return cur.fetchall() if result and result.status == TUPLES_OK else []
        except psycopg.errors.UniqueViolation as exc:
            raise DuplicateKey(f"database error: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"database error: {exc}") from exc


class Psycopg2Executor:
    has_copy = False
    prepares = False

    def __init__(self, conn: Any) -> None:
        import psycopg2.extensions  # noqa: PLC0415  # optional: only with such a connection

        self.conn = conn
        self.database = database_of(conn)
        self.cursor_type = psycopg2.extensions.cursor  # plain tuples, whatever the connection's
        self.error = psycopg2.Error

    def transactional(self) -> bool:
        return not self.conn.autocommit

    def execute(self, op: Op) -> Rows:
        if isinstance(op, Copy):
            raise TypeError("psycopg2 takes the multi-row insert, not COPY")
        try:
            with self.conn.cursor(cursor_factory=self.cursor_type) as cur:
                cur.execute(op.sql, op.params or None)
                return [tuple(r) for r in cur.fetchall()] if cur.description else []
        except self.error as exc:
            if sqlstate(exc) == UNIQUE_VIOLATION:
                raise DuplicateKey(f"database error: {exc}") from exc
            raise StoreError(f"database error: {exc}") from exc


class SqlAlchemyExecutor:
    """An SQLAlchemy ``Connection`` (a ``Session`` hands over its own), any driver below.

    Statements go through ``exec_driver_sql`` in the dialect's placeholder
    style, so SQLAlchemy sees them and begins its transaction as for any other
    statement: the caller's ``commit()`` commits them.
    """

    has_copy = False

    def __init__(self, conn: Any) -> None:
        import sqlalchemy.exc  # noqa: PLC0415  # optional: only with such a connection

        self.conn = conn
        self.style = conn.dialect.paramstyle
        driver_conn = conn.connection.driver_connection
        self.database = database_of(driver_conn)
        self.prepares = keeps_prepared(driver_conn)
        self.error = sqlalchemy.exc.DBAPIError

    def transactional(self) -> bool:
        return True

    def execute(self, op: Op) -> Rows:
        if isinstance(op, Copy):
            raise TypeError("SQLAlchemy takes the multi-row insert, not COPY")
        sql, params = render(op, self.style)
        try:
            result = self.conn.exec_driver_sql(sql, params or None)
            return [tuple(r) for r in result.fetchall()] if result.returns_rows else []
        except self.error as exc:
            if sqlstate(exc) == UNIQUE_VIOLATION:
                raise DuplicateKey(f"database error: {exc.orig}") from exc
            raise StoreError(f"database error: {exc.orig}") from exc


class DjangoExecutor:
    """Django's connection: statements through its cursor, so Django sees them as its own
    (query logging, its error wrapping, a failed atomic block marked for rollback).

    On the psycopg 3 backend the COPY goes through the connection underneath,
    in the same transaction; psycopg2's takes the multi-row insert.
    """

    def __init__(self, conn: Any) -> None:
        import django.db  # noqa: PLC0415  # optional: only with such a connection

        if conn.vendor != "postgresql":
            raise TypeError(f"enqueue needs a PostgreSQL database, not {conn.vendor}")
        conn.ensure_connection()
        self.conn = conn
        self.raw = conn.connection
        self.has_copy = isinstance(self.raw, psycopg.Connection)
        self.database = database_of(self.raw)
        # Django's psycopg 3 backend binds on the client (a ClientCursor) unless
        # OPTIONS asks for server_side_binding; psycopg2 always does.
        self.prepares = keeps_prepared(self.raw)
        self.error = django.db.DatabaseError

    def transactional(self) -> bool:
        return not self.conn.get_autocommit()

    def execute(self, op: Op) -> Rows:
        if isinstance(op, Copy):
            return PsycopgExecutor(self.raw).execute(op)
        try:
            with self.conn.cursor() as cur:
                cur.execute(op.sql, op.params or None)
                return [tuple(r) for r in cur.fetchall()] if cur.description else []
        except self.error as exc:
            if sqlstate(exc) == UNIQUE_VIOLATION:
                raise DuplicateKey(f"database error: {exc}") from exc
            raise StoreError(f"database error: {exc}") from exc


def executor_for(conn: object) -> Executor:
    """The executor for ``conn``, chosen by its type; TypeError names the accepted ones."""
    if isinstance(conn, psycopg.Connection):
        return PsycopgExecutor(conn)
    module = type(conn).__module__
    if module.startswith("psycopg2"):
        import psycopg2.extensions  # noqa: PLC0415

        if isinstance(conn, psycopg2.extensions.connection):
            return Psycopg2Executor(conn)
    if module.startswith("sqlalchemy"):
        import sqlalchemy  # noqa: PLC0415
        import sqlalchemy.orm  # noqa: PLC0415

        if isinstance(conn, sqlalchemy.orm.Session):
            conn.flush()  # pending objects first: the email may name rows they insert
            return SqlAlchemyExecutor(conn.connection())
        if isinstance(conn, sqlalchemy.Connection):
            return SqlAlchemyExecutor(conn)
    if module.startswith("django.db"):
        from django.db.backends.base.base import BaseDatabaseWrapper  # noqa: PLC0415

        if isinstance(conn, BaseDatabaseWrapper):
            return DjangoExecutor(conn)
    hint = ""
    if isinstance(conn, psycopg.AsyncConnection) or module.startswith(
        ("asyncpg", "sqlalchemy.ext.asyncio")
    ):
        hint = "; for an asynchronous connection await enqueue_async / enqueue_many_async"
    raise TypeError(f"enqueue takes {SYNC_TYPES}, not {type(conn).__qualname__}{hint}")
