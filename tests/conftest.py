"""Real servers only: Postgres and Redis of this machine, SMTP started per test.

A server that does not answer fails the run with what to start; nothing skips.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis

from outbox.config import Settings
from outbox.db.store import migration_runner
from tests.rabbitmq import empty_queues, private_vhost
from tests.spans import spans  # noqa: F401  # the fixture, for every test module

# The developer's own OUTBOX_* settings must not leak into the tests.
for _name in [n for n in os.environ if n.startswith("OUTBOX_")]:
    del os.environ[_name]

ADMIN_URL = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
START_POSTGRES = (
    "start it with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, "
    "or set DATABASE_URL (./dev test starts an embedded one when none answers)"
)
START_REDIS = (
    "start it with `redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save ''`, "
    "or set REDIS_URL"
)


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A database of this test session's own, migrated, dropped at the end."""
    name = f"outbox_test_{uuid.uuid4().hex[:8]}"
    try:
        admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"Postgres at {ADMIN_URL} does not answer ({exc}); {START_POSTGRES}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = _with_database(ADMIN_URL, name)
    with psycopg.connect(url) as conn:
        migration_runner.migrate(conn)
    yield url
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def redis_client() -> redis.Redis:
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=5)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.fail(f"Redis at {REDIS_URL} does not answer ({exc}); {START_REDIS}")
    return client


@pytest.fixture(scope="session")
def rabbitmq_url() -> Iterator[str]:
    """RabbitMQ of this machine: a virtual host of this test session's own."""
    with private_vhost() as url:
        yield url


# The tables a test starts with empty, their ids from 1 again.
TEST_TABLES = (
    "email_outbox", "email_attempt", "email_event", "email_suppression", "email_bounce",
    "outbox_process", "outbox_breaker", "email_key_tombstone", "email_attachment_blob",
    "email_attachment_use", "console_audit", "console_session", "domain_check",
    "outbox_event", "webhook_endpoint", "webhook_delivery",
)  # fmt: skip


@pytest.fixture(scope="session")
def emptying(database_url: str) -> str:
    """What empties :data:`TEST_TABLES` and restarts their ids.

    A TRUNCATE makes and syncs new files for every table and index, some 70 ms
    for all of them, while a test writes to a few: only the tables with pages
    are truncated (one without is as fresh as a truncated one, so rows come
    back in the order they are written, as the claim's ties rely on).
    """
    with psycopg.connect(database_url) as conn:
        sequences = conn.execute(
            "SELECT seq FROM (SELECT pg_get_serial_sequence(table_name, column_name) AS seq"
            " FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ANY(%s)) AS owned"
            " WHERE seq IS NOT NULL",
            (list(TEST_TABLES),),
        ).fetchall()
    tables = ", ".join(f"'{table}'" for table in TEST_TABLES)
    truncate = (
        "DO $$ DECLARE written text[]; BEGIN"
        f" SELECT array_agg(quote_ident(t)) INTO written FROM unnest(ARRAY[{tables}]) AS t"
        " WHERE pg_relation_size(quote_ident(t)) > 0;"
        " IF written IS NOT NULL THEN"
        " EXECUTE 'TRUNCATE ' || array_to_string(written, ', ');"
        " END IF; END $$;"
    )
    restarts = [f"ALTER SEQUENCE {name} RESTART;" for (name,) in sequences]
    return " ".join([truncate, *restarts])


@pytest.fixture
def settings(database_url: str, redis_client: redis.Redis, emptying: str) -> Iterator[Settings]:
    """Fresh tables and a broker namespace of the test's own; time compressed."""
    with psycopg.connect(database_url) as conn:
        conn.execute(emptying)
    namespace = f"outbox-test-{uuid.uuid4().hex[:8]}"
    yield Settings(
        database_url=database_url,
        redis_url=REDIS_URL,
        namespace=namespace,
        retry_base_seconds=0.05,
        retry_cap_seconds=0.2,
        greylist_min_seconds=0.3,
        poll_interval=0.2,
        sweep_interval=0.5,
    )
    for key in redis_client.scan_iter(f"{namespace}*"):
        redis_client.delete(key)


@pytest.fixture(params=["redis", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def broker_of(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """:func:`settings` on each broker in turn (RabbitMQ: this session's virtual host)."""
    if request.param == "redis":
        return settings
    url: str = request.getfixturevalue("rabbitmq_url")
    empty_queues(url, settings.namespace)
    return dataclasses.replace(settings, broker_url=url)


@pytest.fixture
def conn(settings: Settings) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(settings.database_url) as connection:
        yield connection
