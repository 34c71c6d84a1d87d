"""`outbox migrate` on a large table that takes traffic the whole time."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from outbox import enqueue
from outbox.config import Settings
from outbox.db.sql import migrations
from outbox.db.store import migration_runner
from outbox.errors import StoreError
from tests.conftest import ADMIN_URL, _with_database
from tests.integration.helpers import LOGIN

LATEST = migrations()[-1].version


@pytest.fixture
def empty_url() -> Iterator[str]:
    """A database of the test's own with no schema at all."""
    name = f"outbox_migrate_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield _with_database(ADMIN_URL, name)
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _migrate(url: str, **kwargs: object) -> list[str]:
    with psycopg.connect(url) as conn:
        return migration_runner.migrate(conn, **kwargs)  # type: ignore[arg-type]


# Columns of the first version of the table: valid at every later version too.
_ENQUEUE = (
    "INSERT INTO email_outbox (idempotency_key, recipient, template, params, content_hash,"
    " message_id, priority) VALUES (%s, 'u@example.com', 'login_code', '{}', 'h', %s, 'high')"
)


class Enqueues(threading.Thread):
    """Enqueues one email per transaction until stopped; the longest one."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.longest = 0.0
        self.count = 0
        self.errors: list[BaseException] = []

    def run(self) -> None:
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                while not self.stop.is_set():
                    key = uuid.uuid4().hex
                    started = time.monotonic()
                    conn.execute(_ENQUEUE, (key, f"<{key}@t.example>"))
                    self.longest = max(self.longest, time.monotonic() - started)
                    self.count += 1
                    time.sleep(0.005)
        except BaseException as exc:  # the test reads it
            self.errors.append(exc)


@pytest.mark.slow
def test_every_migration_runs_on_a_million_rows_without_stalling_enqueues(
    empty_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _migrate(empty_url, upto=1) == ["0001_outbox"]
    with psycopg.connect(empty_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO email_outbox (idempotency_key, recipient, template, params,"
            " content_hash, message_id, priority, status, sent_at)"
            " SELECT 'k' || g, 'r' || g % 50000 || '@example.com', 'newsletter',"
            " '{\"name\": \"R\"}', 'h', '<m' || g || '@t.example>', 'bulk',"
            " CASE WHEN g % 10 = 0 THEN 'pending' ELSE 'sent' END,"
            " CASE WHEN g % 10 = 0 THEN NULL ELSE now() END"
            " FROM generate_series(1, 1000000) AS g"
        )
        conn.execute("VACUUM ANALYZE email_outbox")
    traffic = Enqueues(empty_url)
    traffic.start()
    time.sleep(0.5)
    started = time.monotonic()
    applied = _migrate(empty_url, lock_timeout=0.5)
    took = time.monotonic() - started
    time.sleep(0.2)
    traffic.stop.set()
    traffic.join(30)

    assert traffic.errors == []
    # Every migration, then this release's enqueue function (while enqueues run too).
    assert applied[:-1] == [m.label for m in migrations()[1:]]
    assert applied[-1].startswith("email_enqueue_")
    assert traffic.count > 0
    with capsys.disabled():
        print(
            f"\nmigrations 0002..{LATEST:04d} on 1,000,000 rows: {took:.1f}s; "
            f"{traffic.count} enqueues meanwhile, longest {traffic.longest * 1000:.0f} ms"
        )
    # No step held enqueues up for a tenth of the run (a table rewrite or a plain
    # index build on a million rows would); both figures stretch alike on a loaded machine.
    assert traffic.longest < took / 10
    with psycopg.connect(empty_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_index WHERE NOT indisvalid").fetchone() == (0,)
        assert conn.execute(
            "SELECT count(*) FROM pg_constraint WHERE NOT convalidated"
        ).fetchone() == (0,)
        # The upgraded schema takes a real enqueue.
        done = enqueue(
            conn,
            idempotency_key="after-upgrade",
            to="a@example.com",
            template="login_code",
            params=LOGIN,
            settings=Settings(database_url=empty_url),
        )
        assert done.created


def test_an_index_left_invalid_by_an_interrupted_build_is_rebuilt(empty_url: str) -> None:
    _migrate(empty_url, upto=6)
    with psycopg.connect(empty_url, autocommit=True) as conn:
        for key in ("a", "b"):
            conn.execute(_ENQUEUE, (key, f"<{key}@t.example>"))
        # A concurrent build that fails half-way leaves its index behind, INVALID.
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                "CREATE UNIQUE INDEX CONCURRENTLY email_outbox_unsent_age"
                " ON email_outbox (priority)"
            )
        assert conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = 'email_outbox_unsent_age'::regclass"
        ).fetchone() == (False,)

    # Up to the migration that builds it (a later one replaces it by another).
    assert "0007_unsent_age" in _migrate(empty_url, upto=7)

    with psycopg.connect(empty_url) as conn:
        valid, definition = conn.execute(
            "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i"
            " WHERE indexrelid = 'email_outbox_unsent_age'::regclass"
        ).fetchone()  # type: ignore[misc]
    assert valid is True
    assert "GREATEST(created_at, requeued_at)" in definition
    assert "UNIQUE" not in definition


def _hold_table(url: str, release: threading.Event) -> threading.Thread:
    """A transaction that holds a share of email_outbox until ``release``."""
    held = threading.Event()

    def hold() -> None:
        with psycopg.connect(url) as conn:
            conn.execute("SELECT 1 FROM email_outbox LIMIT 1")
            held.set()
            release.wait(30)
            conn.rollback()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert held.wait(10)
    return thread


@pytest.mark.slow
def test_a_migration_waits_behind_a_long_transaction_without_holding_up_enqueues(
    empty_url: str,
) -> None:
    _migrate(empty_url, upto=1)
    release = threading.Event()
    holder = _hold_table(empty_url, release)
    waits: list[tuple[str, int]] = []
    traffic = Enqueues(empty_url)
    traffic.start()
    # Enqueues done by the migration's first wait, and by the release of the table.
    done_at: dict[str, int] = {}

    def waited(label: str, attempt: int) -> None:
        waits.append((label, attempt))
        done_at.setdefault("first wait", traffic.count)

    def release_table() -> None:
        done_at["release"] = traffic.count
        release.set()

    threading.Timer(2.0, release_table).start()

    applied = _migrate(empty_url, lock_timeout=0.1, on_wait=waited)

    traffic.stop.set()
    traffic.join(10)
    holder.join(10)
    assert applied[0] == "0002_requeue"
    assert ("0002_requeue", 1) in waits
    assert traffic.errors == []
    # Behind a queued ALTER TABLE every enqueue would have waited the 2 s out: none
    # would have finished between the migration's first wait and the release.
    assert done_at["release"] - done_at["first wait"] >= 10


def test_a_lock_never_granted_stops_the_run_with_what_to_do(empty_url: str) -> None:
    _migrate(empty_url, upto=1)
    release = threading.Event()
    holder = _hold_table(empty_url, release)
    try:
        with pytest.raises(StoreError, match=r"0002_requeue could not take its lock in 3 tries"):
            _migrate(empty_url, lock_timeout=0.05, retries=2)
    finally:
        release.set()
        holder.join(10)
    with psycopg.connect(empty_url) as conn:
        assert [s.version for s in migration_runner.migration_status(conn) if s.applied_at] == [1]
    assert _migrate(empty_url)[0] == "0002_requeue"


def test_status_lists_pending_migrations_of_an_empty_database(empty_url: str) -> None:
    with psycopg.connect(empty_url) as conn:
        states = migration_runner.migration_status(conn)
    assert [s.version for s in states] == list(range(1, LATEST + 1))
    assert all(s.applied_at is None for s in states)
