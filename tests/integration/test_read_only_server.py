"""A connection that finds itself on a server that takes no writes is let go.

After a failover the old primary, if it still answers, is a standby or fenced
read-only. Postgres reports ``default_transaction_read_only`` (and, on a
standby, ``in_hot_standby``) to the client when it changes, so a session-level
``SET default_transaction_read_only = on`` stands in for that server here: the
client sees the same report and the same refusal (SQLSTATE 25006).
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from outbox.config import Settings
from outbox.db.store import connections
from outbox.db.store.listener import Listener
from outbox.errors import StoreError

READ_ONLY = "SET default_transaction_read_only = on"


def _pid(conn: connections.Conn) -> int:
    return conn.info.backend_pid


def _write(conn: connections.Conn) -> None:
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS probe (x int)")
    conn.execute("INSERT INTO probe VALUES (1)")


def _write_on_a_read_only_session(pool: connections.Pool, expected_pid: int) -> None:
    with pool.connection() as conn:
        assert _pid(conn) == expected_pid
        # The report arrives with the SET's answer; the next transaction is refused.
        conn.execute(READ_ONLY)
        conn.commit()
        with connections.translate_errors():
            _write(conn)


def test_a_pooled_connection_refused_a_write_is_discarded_and_a_writable_one_lent(
    settings: Settings,
) -> None:
    with connections.Pool(settings.database_url, name="t", min_size=1, max_size=1) as pool:
        with pool.connection() as conn:
            first = _pid(conn)
        with pytest.raises(StoreError, match="read-only"):
            _write_on_a_read_only_session(pool, first)
        with pool.connection(timeout=10) as conn:
            assert _pid(conn) != first
            _write(conn)
            assert not connections.on_read_only_server(conn)


def test_a_pooled_connection_turned_read_only_while_idle_is_not_lent(settings: Settings) -> None:
    with connections.Pool(settings.database_url, name="t", min_size=1, max_size=1) as pool:
        with pool.connection() as conn:
            first = _pid(conn)
            conn.execute(READ_ONLY)  # session-wide: it outlives the transaction
        with pool.connection(timeout=10) as conn:
            assert _pid(conn) != first
            _write(conn)


def test_a_refused_write_counts_as_a_lost_connection(settings: Settings) -> None:
    with connections.connect(settings.database_url) as conn:
        conn.execute(READ_ONLY)
        conn.commit()
        with pytest.raises(StoreError) as refused, connections.translate_errors():
            _write(conn)
        assert connections.on_read_only_server(conn)
        assert connections.connection_lost(refused.value, conn)
    with connections.connect(settings.database_url) as conn:
        with pytest.raises(StoreError) as plain, connections.translate_errors():
            conn.execute("SELECT 1/0")
        assert not connections.connection_lost(plain.value, conn)


def test_the_listener_leaves_a_read_only_server_and_listens_again(settings: Settings) -> None:
    listener = Listener(settings.database_url, "outbox_test_read_only", probe_seconds=2.0)
    stop = threading.Event()
    try:
        listener.wait(0.3, stop)
        assert listener.working is True
        conn: Any = listener.conn
        assert conn is not None
        first = _pid(conn)
        # Another session makes the listening one read-only, as a failover would.
        with psycopg.connect(settings.database_url, autocommit=True) as other:
            other.execute("SELECT pg_notify('outbox_test_read_only', 'wake')")
        listener.wait(1.0, stop)  # the notification: returns with the connection kept
        assert listener.conn is conn
        conn.execute(READ_ONLY)
        listener.wait(0.5, stop)
        assert listener.conn is None, "still listening on a read-only server"
        listener.wait(0.3, stop)
        assert listener.conn is not None
        assert _pid(listener.conn) != first
    finally:
        listener.close()
