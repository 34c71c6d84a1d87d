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
import json
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
import psycopg
import psycopg.conninfo
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool, PoolTimeout

from outbox.errors import PoolExhausted, SchemaMissing, StoreError, first_line

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
        raise SchemaMissing(
            f"the database has no Outbox tables or older ones ({first_line(exc)}):"
            " run `outbox migrate`"
        ) from exc
    except psycopg.Error as exc:
        raise StoreError(f"database error: {exc}") from exc


def connect(
    url: str,
    *,
    autocommit: bool = False,
    timeout: float = 10.0,
    prepare: bool = True,
    generic_plans: bool = False,
) -> Conn:
    """A connection of its own, for the processes that keep one (metrics, LISTEN, CLI,
    a worker's result writer); ``prepare=False`` behind PgBouncer's transaction mode.

    ``generic_plans``: prepared statements are planned once, not per call.
    Postgres plans one again for each call while the plan for its values looks
    cheaper than the generic one, as it always does for a few rows found by an
    array of ids (three ids cost less than the ten a generic plan assumes),
    though both read the primary key: planning the result writer's statement
    costs more than running it. For connections whose statements all find
    rows by id; without prepared statements nothing is planned once."""
    with translate_errors():
        conn = psycopg.connect(
            url,
            autocommit=autocommit,
            connect_timeout=max(1, int(timeout)),
            prepare_threshold=5 if prepare else None,
        )
        if generic_plans and prepare:
            try:
                conn.execute("SET plan_cache_mode = force_generic_plan")
                if not autocommit:
                    conn.commit()
            except BaseException:
                conn.close()
                raise
        return conn


def libpq_keywords() -> frozenset[str]:
    """The connection parameters libpq knows (host, sslmode, target_session_attrs…)."""
    return frozenset(o.keyword.decode() for o in psycopg.pq.Conninfo.get_defaults())


def connect_params(**params: str | None) -> Conn:
    """A connection from libpq keywords (dbname, user, host…), as a framework's settings give."""
    conninfo = psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if v is not None})
    with translate_errors():
        return psycopg.connect(conninfo)


def id_array(ids: Iterable[int]) -> str:
    """``ids`` as a Postgres array literal, for a ``%(ids)s::bigint[]`` parameter.

    psycopg chooses a list's dumper by looking at its elements on every call,
    which costs a statement that names a few rows more client CPU than the rest
    of sending it (15 to 35 µs, measured); the literal costs one join.
    """
    return "{" + ",".join(map(str, ids)) + "}"


def connection_lost(exc: BaseException, conn: Conn) -> bool:
    """Whether ``exc`` means the connection is gone (not the statement's own fault).

    A server that refuses to write is a primary no more (a standby promoted in
    its place, or the old primary fenced read-only): the connection is as good
    as gone, and a new one, found by ``target_session_attrs=read-write``,
    reaches the primary.
    """
    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    return conn.closed or isinstance(
        cause, psycopg.OperationalError | psycopg.InterfaceError | _READ_ONLY
    )


_READ_ONLY = psycopg.errors.ReadOnlySqlTransaction  # SQLSTATE 25006


def on_read_only_server(conn: Conn) -> bool:
    """Whether the server said it takes no writes, read without a round trip.

    Postgres 14 and later report ``in_hot_standby`` and
    ``default_transaction_read_only`` to the client when they change (a
    promotion, a reload): a standby, or a primary fenced read-only. Older
    servers report neither: such a connection is found out by its first write.
    """
    info = conn.info
    return "on" in (
        info.parameter_status("in_hot_standby"),
        info.parameter_status("default_transaction_read_only"),
    )


def check_writable(conn: Conn) -> None:
    """The pool's check before it lends a connection: alive, and on a primary."""
    ConnectionPool.check_connection(conn)
    if on_read_only_server(conn):
        conn.close()  # the pool replaces a closed connection; an open one it would lend again
        raise psycopg.OperationalError("the server takes no writes (a standby?)")


def _json_loads(data: str | bytes) -> Any:
    """A json or jsonb value: Outbox writes them with orjson, which reads them back as
    written in a tenth of the time of the json module (on a worker, four per row).
    What orjson refuses, a number past a double's range written by other means, is
    read by json as before."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def read_json_fast(conn: Conn) -> None:
    """The pool's set-up of each new connection: json and jsonb read by orjson.
    Per connection, not psycopg's global default, which the application's own
    connections share."""
    set_json_loads(_json_loads, conn)


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
            check=check_writable,
            configure=read_json_fast,
            name=name,
            open=True,
            kwargs={} if prepare else {"prepare_threshold": None},
        )

    @contextlib.contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[Conn]:
        """A connection whose transaction commits when the block ends without error."""
        try:
            with translate_errors(), self._pool.connection(timeout) as conn:
                try:
                    yield conn
                except Exception as exc:
                    self._discard_if_read_only(conn, exc)
                    raise
        except StoreError as exc:
            if isinstance(exc.__cause__, PoolTimeout):
                raise PoolExhausted(str(exc)) from exc.__cause__
            raise

    def _discard_if_read_only(self, conn: Conn, exc: Exception) -> None:
        """A write refused as read-only: the primary has moved. This connection
        is closed (the pool discards a closed one) and the others are replaced
        as they come back, so that none stays on the old server."""
        cause = exc.__cause__ if isinstance(exc, StoreError) else exc
        if isinstance(cause, _READ_ONLY) or (not conn.closed and on_read_only_server(conn)):
            conn.close()
            self._pool.drain()

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
