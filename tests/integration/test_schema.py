"""OUTBOX_SCHEMA: the outbox in a schema of its own, beside the application's tables.

The test database's ``public`` schema holds another outbox (the suite's), so a
statement that named a table bare would land there: every check below also
shows that ``public`` was left alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import outbox
from outbox.config import Settings
from outbox.db import enqueue_statements, sql
from outbox.db.sql.schema import FUNCTIONS, TABLES
from outbox.db.store import (
    console_sessions,
    data_retention,
    lookups,
    migration_runner,
    suppressions,
)
from outbox.errors import ConfigError
from outbox.intake import COLUMNS
from outbox.testing.sink import SmtpSink
from tests.integration.drivers import ASYNC, SYNC
from tests.integration.helpers import LOGIN, NEWS, harness, wait_until
from tests.integration.test_http_api import running
from tests.integration.test_pgbouncer import _through, pgbouncer  # noqa: F401  # the fixture
from tests.integration.test_small_profile import small_worker

ROOT = Path(__file__).resolve().parents[2]
OLD = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
OUTBOX = str(Path(sys.executable).with_name("outbox"))  # the installed command


@pytest.fixture
def in_schema(settings: Settings) -> Iterator[Settings]:
    """Settings and this process's SQL in a fresh schema, migrated; dropped afterwards."""
    name = f"mail_{uuid.uuid4().hex[:8]}"
    with sql.use_schema(name):
        with psycopg.connect(settings.database_url) as conn:
            migration_runner.migrate(conn)
        yield dataclasses.replace(settings, schema=name)
    with psycopg.connect(settings.database_url) as conn:
        migration_runner.drop_schema(conn, name)


def rows(settings: Settings, table: str = "email_outbox") -> list[tuple[Any, ...]]:
    """(key, status) of ``table`` in the settings' schema, or in public when it is empty."""
    where = f'"{settings.schema}".{table}' if settings.schema else f"public.{table}"
    columns = "idempotency_key, status" if table == "email_outbox" else "*"
    with psycopg.connect(settings.database_url) as conn:
        return conn.execute(f"SELECT {columns} FROM {where} ORDER BY 1".encode()).fetchall()


def public(settings: Settings) -> Settings:
    return dataclasses.replace(settings, schema="")


def login(key: str, to: str = "alice@example.com") -> dict[str, Any]:
    return {"idempotency_key": key, "to": to, "template": "login_code", "params": LOGIN}


def news(n: int) -> list[dict[str, Any]]:
    return [
        {"idempotency_key": f"nl-{i}", "to": f"r{i}@example.com", "template": "newsletter",
         "params": NEWS}
        for i in range(n)
    ]  # fmt: skip


def test_migrate_builds_every_table_and_function_in_the_schema(in_schema: Settings) -> None:
    with psycopg.connect(in_schema.database_url) as conn:
        found = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind = 'r'",
            (in_schema.schema,),
        ).fetchall()
        functions = conn.execute(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = %s",
            (in_schema.schema,),
        ).fetchall()
        assert {r[0] for r in found} == TABLES
        # And this release's enqueue function (its name is a hash), in the schema too.
        enqueue_function = enqueue_statements.enqueue_function(COLUMNS, in_schema.schema)
        assert enqueue_function.name.startswith(f'"{in_schema.schema}".email_enqueue_')
        assert {r[0] for r in functions} == FUNCTIONS | {enqueue_function.name.split(".")[1]}
        states = migration_runner.migration_status(conn)
        assert states
        assert all(s.applied_at is not None for s in states)
        assert migration_runner.migrate(conn) == []  # a second run finds everything applied
    # The application's own connection keeps its search_path: public comes first.
    with psycopg.connect(in_schema.database_url) as conn:
        assert conn.execute("SELECT current_schema()").fetchone() == ("public",)


@pytest.mark.parametrize("name", sorted(SYNC))
def test_every_driver_enqueues_into_the_schema(name: str, in_schema: Settings) -> None:
    with SYNC[name](in_schema.database_url) as h:
        first = outbox.enqueue(h.conn, **login("signup"), settings=in_schema)
        many = outbox.enqueue_many(h.conn, news(30), settings=in_schema)  # COPY on psycopg
        h.commit()
    with SYNC[name](in_schema.database_url) as h:
        again = outbox.enqueue(h.conn, **login("signup"), settings=in_schema)
        h.commit()
    assert first.created
    assert not again.created
    assert (again.id, again.message_id) == (first.id, first.message_id)
    assert len(rows(in_schema)) == 31
    assert len(many) == 30
    assert rows(public(in_schema)) == []


@pytest.mark.parametrize("name", sorted(ASYNC))
def test_every_async_driver_enqueues_into_the_schema(name: str, in_schema: Settings) -> None:
    async def run() -> None:
        async with ASYNC[name](in_schema.database_url) as h:
            await outbox.enqueue_async(h.conn, **login("signup"), settings=in_schema)
            await outbox.enqueue_many_async(h.conn, news(30), settings=in_schema)  # COPY
            await h.commit()

    asyncio.run(run())
    assert len(rows(in_schema)) == 31
    assert rows(public(in_schema)) == []


def test_suppression_purge_tombstones_and_forget_stay_in_the_schema(
    in_schema: Settings,
) -> None:
    with psycopg.connect(in_schema.database_url) as conn:
        suppressions.suppress(conn, "bob@example.com", reason="complaint")
        conn.commit()
        outbox.enqueue(conn, **login("to-bob", "bob@example.com"), settings=in_schema)
        sent = outbox.enqueue(conn, **login("to-alice"), settings=in_schema)
        conn.commit()
        assert rows(in_schema) == [("to-alice", "pending"), ("to-bob", "suppressed")]
        table = f'"{in_schema.schema}".email_outbox'
        conn.execute(
            f"UPDATE {table} SET status = 'sent', sent_at = %s, created_at = %s".encode(),
            (OLD, OLD),
        )
        conn.commit()
        purged = data_retention.purge(conn, before=dt.datetime(2021, 1, 1, tzinfo=dt.UTC))
        assert purged.emails == 2
        again = outbox.enqueue(conn, **login("to-alice"), settings=in_schema)
        conn.commit()
        assert (again.created, again.status, again.message_id) == (
            False, "purged", sent.message_id,
        )  # fmt: skip
        forgotten = data_retention.forget(conn, "bob@example.com", pattern="bob@example\\.com")
        conn.commit()
        assert forgotten.suppression_kept
        refused = outbox.enqueue(conn, **login("to-bob-2", "bob@example.com"), settings=in_schema)
        conn.commit()
        assert refused.status == "suppressed"
        with sql.use_schema(""):
            assert suppressions.find_suppression(conn, "bob@example.com") is None  # public's list


def test_address_lookups_and_console_sessions_work_in_the_schema(in_schema: Settings) -> None:
    with psycopg.connect(in_schema.database_url) as conn:
        outbox.enqueue(conn, **login("to-carol", "Carol@Example.com"), settings=in_schema)
        table = f'"{in_schema.schema}".email_outbox'
        conn.execute(f"UPDATE {table} SET status = 'sent', sent_at = now()".encode())
        found = lookups.find_messages_to(conn, "carol@example.com")
        assert [r["idempotency_key"] for r in found] == ["to-carol"]  # the keyed-hash index
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
        session = console_sessions.console_session_add(
            conn, token_hash=b"h" * 32, user_name="ops", role="operator", expires_at=expires
        )
        assert console_sessions.console_session_find(conn, b"h" * 32) is not None
        assert console_sessions.console_session_revoke(conn, b"h" * 32)
        assert console_sessions.console_session_find(conn, b"h" * 32) is None
        conn.commit()
    assert session > 0
    with psycopg.connect(in_schema.database_url) as conn, sql.use_schema(""):
        assert lookups.find_messages_to(conn, "carol@example.com") == []  # public's outbox


def test_relay_and_delivery_send_from_the_schema(in_schema: Settings) -> None:
    assert _send_all(in_schema, in_schema, 20) == 21
    attempts = _count(in_schema, "email_attempt")
    events = _count(in_schema, "email_event")
    assert attempts == 21
    assert events >= 21 * 3


@pytest.mark.pgbouncer
def test_through_pgbouncer_in_transaction_mode(
    in_schema: Settings,
    pgbouncer: int,  # noqa: F811
) -> None:
    # The pooler keeps no SET search_path and passes no startup options: only
    # names written into each statement reach the schema.
    bounced = dataclasses.replace(
        in_schema,
        database_url=_through(in_schema.database_url, pgbouncer),
        prepared_statements="off",
    )
    assert _send_all(bounced, in_schema, 40) == 41
    assert rows(public(in_schema)) == []


def test_the_http_api_enqueues_and_answers_from_the_schema(in_schema: Settings) -> None:
    public_keys = len(rows(public(in_schema), "outbox_api_key"))
    for api in running(in_schema):
        token = api.key("send", "read")
        body = {"to": "alice@example.com", "template": "login_code", "params": LOGIN}
        posted = api.post("/v1/emails", token, body, key="api-1")
        assert posted.status_code == 202, posted.text
        again = api.post("/v1/emails", token, body, key="api-1")
        assert again.status_code == 200
        found = api.get("/v1/emails", token, idempotency_key="api-1")
        assert found.status_code == 200
        assert found.json()["message_id"] == posted.json()["message_id"]
    assert rows(in_schema) == [("api-1", "pending")]
    assert rows(public(in_schema)) == []
    assert len(rows(public(in_schema), "outbox_api_key")) == public_keys
    assert len(rows(in_schema, "outbox_api_key")) == 1


@pytest.mark.slow
def test_processes_and_the_cli_read_outbox_schema(in_schema: Settings, tmp_path: Path) -> None:
    env = {**os.environ, **in_schema.to_env()}
    migrate = _cli(env, "migrate", "--status", "--json")
    assert all(m["applied_at"] for m in json.loads(migrate))
    with SmtpSink() as sink, small_worker(in_schema, sink, tmp_path / "worker.log"):
        with psycopg.connect(in_schema.database_url) as conn:
            outbox.enqueue(conn, **login("login-1"), priority="high", settings=in_schema)
            outbox.enqueue_many(conn, news(10), settings=in_schema)
            conn.commit()
        wait_until(lambda: {s for _, s in rows(in_schema)} == {"sent"}, timeout=90)
    shown = _cli(env, "show", "login-1", "--json")
    assert json.loads(shown)["email"]["status"] == "sent"
    status = _cli(env, "status", "--json")
    assert json.loads(status)
    assert rows(public(in_schema)) == []
    # Without the setting the CLI reads public's outbox, which has no such email.
    plain = {k: v for k, v in env.items() if k != "OUTBOX_SCHEMA"}
    missing = subprocess.run(
        [OUTBOX, "show", "login-1"], env=plain, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert missing.returncode == 1, missing
    assert "no email" in missing.stderr


def test_settings_naming_another_schema_than_the_process_are_refused(
    in_schema: Settings,
) -> None:
    with sql.use_schema(""), psycopg.connect(in_schema.database_url) as conn:
        with pytest.raises(ConfigError, match="OUTBOX_SCHEMA"):
            outbox.enqueue(conn, **login("mismatch"), settings=in_schema)
        with pytest.raises(ConfigError, match="OUTBOX_SCHEMA"):
            outbox.enqueue_many(conn, news(2), settings=in_schema)
        conn.commit()
    assert rows(in_schema) == []
    assert rows(public(in_schema)) == []


def test_a_malformed_schema_stops_a_process_with_one_line(in_schema: Settings) -> None:
    env = {**os.environ, **in_schema.to_env(), "OUTBOX_SCHEMA": "Bad-Name"}
    done = subprocess.run(
        [OUTBOX, "status"], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "OUTBOX_SCHEMA" in done.stderr
    assert "Traceback" not in done.stderr


def _cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [OUTBOX, *args], env=env, capture_output=True, text=True,
        timeout=60, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _count(settings: Settings, table: str) -> int:
    with psycopg.connect(settings.database_url) as conn:
        found = conn.execute(f'SELECT count(*) FROM "{settings.schema}".{table}'.encode())
        return int(found.fetchone()[0])  # type: ignore[index]


def _send_all(through: Settings, direct: Settings, newsletter: int) -> int:
    """Enqueue a login code and a newsletter, send them all; the Message-IDs received."""
    with psycopg.connect(through.database_url) as conn:
        outbox.enqueue(conn, **login("login-1"), priority="high", settings=through)
        outbox.enqueue_many(conn, news(newsletter), settings=through)
        conn.commit()
    with harness(through) as (h, sink):
        _drain(h, direct)
    assert {s for _, s in rows(direct)} == {"sent"}
    return len(set(sink.message_ids()))


def _drain(h: Any, settings: Settings) -> None:
    def done() -> bool:
        h.relay.run_round()
        while h.groups:
            h.delivery.deliver(h.groups.pop(0))
        return not {s for _, s in rows(settings)} & {"pending", "queued", "sending"}

    wait_until(done, timeout=60, interval=0.05)
