"""Connections to Postgres, and psycopg's errors made Outbox's.

Every function of the store runs its statements inside :func:`translate_errors`,
so callers see :class:`~outbox.errors.StoreError` (or
:class:`~outbox.errors.SchemaMissing`) whatever broke; :class:`Pool` does the
same for psycopg_pool's own errors. Here too: connections of their own
(:func:`connect`), the transaction steps callers take, and whether a failure
means the connection is gone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
import psycopg.conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from outbox.errors import PoolExhausted, SchemaMissing, StoreError

Conn = psycopg.Connection[Any]


# What a statement meets on a database that was never migrated, or migrated
# by an older version: a table, column or function it names is not there.
_SCHEMA_MISSING = (
    psycopg.errors.UndefinedTable,
    psycopg.errors.UndefinedColumn,
    psycopg.errors.UndefinedFunction,
)


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    try:
        yield
    except _SCHEMA_MISSING as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SchemaMissing(
            f"the database has no Outbox tables or older ones ({first}): run `outbox migrate`"
        ) from exc
    except psycopg.Error as exc:
        raise StoreError(f"database error: {exc}") from exc


def connect(
    url: str, *, autocommit: bool = False, timeout: float = 10.0, prepare: bool = True
) -> Conn:
    """A connection of its own, for the processes that keep one (metrics, LISTEN, CLI,
    a worker's result writer); ``prepare=False`` behind PgBouncer's transaction mode."""
    with translate_errors():
        return psycopg.connect(
            url,
            autocommit=autocommit,
            connect_timeout=max(1, int(timeout)),
            prepare_threshold=5 if prepare else None,
        )


def connect_params(**params: str | None) -> Conn:
    """A connection from libpq keywords (dbname, user, host…), as a framework's settings give."""
    conninfo = psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if v is not None})
    with translate_errors():
        return psycopg.connect(conninfo)


def connection_lost(exc: BaseException, conn: Conn) -> bool:
    """Whether ``exc`` means the connection is gone (not the statement's own fault)."""
    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    return conn.closed or isinstance(cause, psycopg.OperationalError | psycopg.InterfaceError)


def transaction_failed(conn: Conn) -> bool:
    """The transaction hit an error: Postgres will commit none of it."""
    return conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR


def ping(conn: Conn) -> None:
    with translate_errors():
        conn.execute("SELECT 1")


def commit(conn: Conn) -> None:
    with translate_errors():
        conn.commit()


def rollback(conn: Conn) -> None:
    with translate_errors():
        conn.rollback()


class Pool:
    """A connection pool whose every failure is a :class:`StoreError`.

    psycopg_pool raises its own errors (a wait that timed out, a closed pool)
    and the connection's exit commits, which can fail too: callers see one
    error type, whichever step broke.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 30.0,
        prepare: bool = True,
    ) -> None:
        # PgBouncer before 1.21 in transaction mode cannot keep a prepared
        # statement: psycopg must not prepare (OUTBOX_PREPARED_STATEMENTS=off).
        self._pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            check=ConnectionPool.check_connection,
            name=name,
            open=True,
            kwargs={} if prepare else {"prepare_threshold": None},
        )

    @contextlib.contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[Conn]:
        """A connection whose transaction commits when the block ends without error."""
        try:
            with translate_errors(), self._pool.connection(timeout) as conn:
                yield conn
        except StoreError as exc:
            if isinstance(exc.__cause__, PoolTimeout):
                raise PoolExhausted(str(exc)) from exc.__cause__
            raise

    def get_stats(self) -> dict[str, int]:
        """psycopg_pool's counters (pool_size, pool_available, requests_waiting, …)."""
        return dict(self._pool.get_stats())

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def conninfo_problem(url: str) -> str | None:
    """libpq's complaint about ``url`` as a connection string; None when it reads it."""
    try:
        psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error as exc:
        return str(exc)
    return None
