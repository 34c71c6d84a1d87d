"""The enqueue function: drivers that prepare nothing call it, the others send
insert_message, and without it (a database not yet migrated to this release)
every driver still enqueues, the same row."""

from __future__ import annotations

import dataclasses
import datetime as dt
import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import psycopg2
import pytest

import outbox
from outbox.config import Settings
from outbox.db import enqueue_statements, sql
from outbox.db.store import data_retention, migration_runner, suppressions
from outbox.errors import StoreError
from outbox.intake import COLUMNS
from tests.conftest import ADMIN_URL, _with_database
from tests.integration.helpers import LOGIN

ROW = (
    "SELECT to_jsonb(o) - 'id' - 'created_at' - 'next_attempt_at' - 'trace_context'"
    " - 'idempotency_key' - 'message_id' FROM email_outbox o WHERE idempotency_key = %s"
)


@pytest.fixture
def fresh(settings: Settings) -> Iterator[Settings]:
    """A database of the test's own, migrated: its function cache entry is its own too."""
    name = f"outbox_fn_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
    url = _with_database(ADMIN_URL, name)
    with psycopg.connect(url) as conn:
        migration_runner.migrate(conn)
    yield dataclasses.replace(settings, database_url=url)
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def _function() -> enqueue_statements.EnqueueFunction:
    return enqueue_statements.enqueue_function(COLUMNS, sql.schema())


def _enqueue_psycopg2(settings: Settings, key: str) -> outbox.Enqueued:
    conn = psycopg2.connect(settings.database_url)
    try:
        done = outbox.enqueue(
            conn, idempotency_key=key, to="alice@example.com", template="login_code",
            params=LOGIN, settings=settings,
        )  # fmt: skip
        conn.commit()
        return done
    finally:
        conn.close()


def _enqueue_psycopg(settings: Settings, key: str) -> outbox.Enqueued:
    with psycopg.connect(settings.database_url) as conn:
        return outbox.enqueue(
            conn, idempotency_key=key, to="alice@example.com", template="login_code",
            params=LOGIN, settings=settings,
        )  # fmt: skip


def _row(settings: Settings, key: str) -> object:
    with psycopg.connect(settings.database_url) as conn:
        found = conn.execute(ROW, (key,)).fetchone()
    assert found is not None
    return found[0]


def test_migrate_creates_this_releases_function(fresh: Settings) -> None:
    with psycopg.connect(fresh.database_url) as conn:
        exists = _function().exists
        assert conn.execute(exists.sql, exists.params).fetchone() == (True,)
        assert migration_runner.migrate(conn) == []  # a second run finds it there


def test_psycopg2_calls_the_function_and_psycopg_prepared_does_not(fresh: Settings) -> None:
    # A function that refuses shows who calls it: same signature, another body.
    name = _function().name
    signature = _function().exists.params["signature"]
    with psycopg.connect(fresh.database_url) as conn:
        conn.execute(f"ALTER FUNCTION {signature} RENAME TO kept".encode())
        args = signature[len(name) :]
        conn.execute(
            f"CREATE FUNCTION {name}{args} RETURNS TABLE (id bigint, message_id text,"
            " content_hash text, created boolean, status text, notified text)"
            " LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'called the function'; END $$".encode()
        )
    with pytest.raises(StoreError, match="called the function"):
        _enqueue_psycopg2(fresh, "by-function")
    assert _enqueue_psycopg(fresh, "by-statement").created  # prepares: insert_message


def test_the_function_writes_the_row_insert_message_writes(fresh: Settings) -> None:
    by_function = _enqueue_psycopg2(fresh, "k-function")
    by_statement = _enqueue_psycopg(fresh, "k-statement")
    assert by_function.created
    assert by_statement.created
    assert _row(fresh, "k-function") == _row(fresh, "k-statement")
    again = _enqueue_psycopg2(fresh, "k-function")  # a known key: the stored Message-ID
    assert (again.created, again.message_id, again.id) == (
        False, by_function.message_id, by_function.id,
    )  # fmt: skip


def test_without_the_function_psycopg2_sends_insert_message(fresh: Settings) -> None:
    with psycopg.connect(fresh.database_url) as conn:
        conn.execute(f"DROP FUNCTION {_function().exists.params['signature']}".encode())
    done = _enqueue_psycopg2(fresh, "k-old-database")
    assert done.created
    assert _row(fresh, "k-old-database") is not None


def test_through_the_function_a_suppressed_recipient_and_a_purged_key_answer_as_before(
    fresh: Settings,
) -> None:
    with psycopg.connect(fresh.database_url) as conn:
        suppressions.suppress(conn, "alice@example.com", scope="all", reason="hard_bounce")
    suppressed = _enqueue_psycopg2(fresh, "k-suppressed")
    assert (suppressed.created, suppressed.status) == (True, "suppressed")

    with psycopg.connect(fresh.database_url) as conn:
        conn.execute("DELETE FROM email_suppression")
        conn.execute(
            "UPDATE email_outbox SET status = 'sent', sent_at = now() - interval '60 days',"
            " created_at = now() - interval '60 days'"
        )
        conn.commit()
        purged = data_retention.purge(conn, before=dt.datetime.now(dt.UTC) - dt.timedelta(days=30))
    assert purged.emails == 1
    again = _enqueue_psycopg2(fresh, "k-suppressed")  # the key stays taken: its tombstone answers
    assert (again.created, again.status, again.id, again.message_id) == (
        False, "purged", suppressed.id, suppressed.message_id,
    )  # fmt: skip


def test_migrate_says_it_created_the_function_and_status_says_when_it_is_pending(
    fresh: Settings,
) -> None:
    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "outbox.cli", *args], env=fresh.to_env(),
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return done.stdout

    short_name = _function().name.rsplit(".", 1)[-1]
    assert cli("migrate", "--status").splitlines()[-2:] == [
        f"{'enqueue function':<37} there", "schema is up to date",
    ]  # fmt: skip
    with psycopg.connect(fresh.database_url) as conn:
        conn.execute(f"DROP FUNCTION {_function().exists.params['signature']}".encode())
    assert cli("migrate", "--status").splitlines()[-2:] == [
        f"{'enqueue function':<37} pending", "1 pending: run `outbox migrate`",
    ]  # fmt: skip
    assert cli("migrate").strip() == f"applied: {short_name}"
    assert cli("migrate").strip() == "schema is up to date"
