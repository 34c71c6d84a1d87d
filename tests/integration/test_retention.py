"""Purging finished emails keeps every key taken; forgetting an address erases it everywhere."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import threading
from typing import Any

import psycopg
import pytest

from outbox import enqueue, enqueue_many
from outbox.cli.input import erasure_pattern
from outbox.config import Settings
from outbox.db.store import data_retention, suppressions
from outbox.errors import IdempotencyConflict
from outbox.relay.retention import Retention
from tests.integration.helpers import LOGIN, NEWS, query, statuses
from tests.integration.test_cli import outbox

OLD = "now() - interval '40 days'"


def _login(conn: psycopg.Connection[Any], settings: Settings, key: str, to: str, **kw: Any) -> Any:
    params = {**LOGIN, **kw}
    return enqueue(
        conn, idempotency_key=key, to=to, template="login_code", params=params, settings=settings
    )


def _history(settings: Settings) -> None:
    """Attempts, an extra event and a bounce report for every row."""
    query(
        settings,
        "INSERT INTO email_attempt (outbox_id, attempt, verdict, reply_code, reply_text)"
        " SELECT id, 1, 'sent', 250, '250 ok for ' || recipient FROM email_outbox RETURNING 1",
    )
    query(
        settings,
        "INSERT INTO email_bounce (raw, outbox_id, link)"
        " SELECT convert_to('bounce for ' || recipient, 'UTF8'), id, 'verp' FROM email_outbox"
        " RETURNING 1",
    )


def test_purge_deletes_finished_emails_and_their_history_in_batches(settings: Settings) -> None:
    with psycopg.connect(settings.database_url) as conn:
        for i in range(7):
            _login(conn, settings, f"old-{i}", f"u{i}@example.com")
        _login(conn, settings, "recent", "r@example.com")
        _login(conn, settings, "old-pending", "p@example.com")
        conn.commit()
    query(settings, f"UPDATE email_outbox SET status = 'sent', sent_at = {OLD},"
                    f" created_at = {OLD} WHERE idempotency_key LIKE 'old-_'"
                    " RETURNING id")  # fmt: skip
    query(settings, "UPDATE email_outbox SET status = 'sent', sent_at = now()"
                    " WHERE idempotency_key = 'recent' RETURNING id")  # fmt: skip
    query(settings, f"UPDATE email_outbox SET created_at = {OLD}"
                    " WHERE idempotency_key = 'old-pending' RETURNING id")  # fmt: skip
    _history(settings)

    dry = json.loads(outbox(settings, "purge", "--older-than", "30d", "--dry-run", "--json").stdout)
    assert dry["would_purge"] == 7
    assert statuses(settings) == {"sent": 8, "pending": 1}

    result = outbox(settings, "purge", "--older-than", "30d", "--batch", "3")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "purged 3 emails so far", "purged 6 emails so far", "purged 7 emails so far"
    ]  # fmt: skip
    assert "purged 7 emails, 7 attempts, 7 events, 7 bounce reports" in result.stdout
    # The recent one and the unfinished one stay, with their history.
    assert sorted(r[0] for r in query(settings, "SELECT idempotency_key FROM email_outbox")) == [
        "old-pending", "recent"
    ]  # fmt: skip
    assert query(settings, "SELECT count(*) FROM email_attempt") == [(2,)]
    assert query(settings, "SELECT count(*) FROM email_bounce") == [(2,)]
    assert query(settings, "SELECT count(*) FROM email_key_tombstone") == [(7,)]
    again = outbox(settings, "purge", "--older-than", "30d")
    assert again.stdout.startswith("no finished email last changed before")


def test_a_purged_key_stays_taken_with_its_message_id(settings: Settings) -> None:
    with psycopg.connect(settings.database_url) as conn:
        first = _login(conn, settings, "signup-1", "a@example.com")
        conn.commit()
    query(settings, f"UPDATE email_outbox SET status = 'sent', sent_at = {OLD},"
                    f" created_at = {OLD} RETURNING id")  # fmt: skip
    with psycopg.connect(settings.database_url) as conn:
        purged = data_retention.purge(conn, before=dt.datetime.now(dt.UTC) - dt.timedelta(days=30))
    assert purged.emails == 1

    with psycopg.connect(settings.database_url) as conn:
        again = _login(conn, settings, "signup-1", "a@example.com")
        conn.commit()
        assert (again.created, again.message_id, again.id) == (False, first.message_id, first.id)
        assert again.status == "purged"
        with pytest.raises(IdempotencyConflict):
            _login(conn, settings, "signup-1", "a@example.com", code="999999")
        conn.rollback()
        # The batch path too: one purged key among new ones.
        results = enqueue_many(
            conn,
            [
                {"idempotency_key": "signup-1", "to": "a@example.com", "template": "login_code",
                 "params": LOGIN},
                {"idempotency_key": "new-1", "to": "b@example.com", "template": "newsletter",
                 "params": NEWS},
            ],
            settings=settings,
        )  # fmt: skip
        conn.commit()
    by_key = {r.idempotency_key: r for r in results}
    assert (by_key["signup-1"].created, by_key["signup-1"].message_id) == (
        False,
        first.message_id,
    )
    assert by_key["new-1"].created
    assert query(settings, "SELECT idempotency_key FROM email_outbox") == [("new-1",)]


def test_forget_erases_an_address_everywhere_and_keeps_it_suppressed(
    settings: Settings,
) -> None:
    with psycopg.connect(settings.database_url) as conn:
        _login(conn, settings, "welcome-Gone@Example.com", "Gone@Example.com", name="Gone Person")
        _login(conn, settings, "code-2", "gone@example.com")
        _login(conn, settings, "other", "stays@example.com")
        conn.commit()
    query(
        settings,
        "UPDATE email_outbox SET status = 'sent', sent_at = now(),"
        " status_reason = '250 ok for ' || recipient WHERE idempotency_key <> 'code-2'"
        " RETURNING id",
    )
    _history(settings)
    with psycopg.connect(settings.database_url) as conn:
        suppressions.suppress(
            conn, "gone@example.com", reason="complaint", detail="from gone@example.com"
        )
        conn.commit()

    result = outbox(settings, "forget", "gone@example.com", "--json")
    assert result.returncode == 0, result.stderr
    done = json.loads(result.stdout)
    assert "gone@" not in result.stdout
    assert (done["emails"], done["attempts"], done["bounces"], done["suppression_kept"]) == (
        2, 2, 2, True
    )  # fmt: skip

    dump = " ".join(
        str(row)
        for table in ("email_outbox", "email_attempt", "email_event", "email_bounce",
                      "email_suppression", "email_key_tombstone")
        for row in query(settings, f"SELECT * FROM {table}")
    ).lower()  # fmt: skip
    assert "gone@example.com" not in dump, dump[max(0, dump.find("gone@example.com") - 300) :][:400]
    assert "gone person" not in dump
    assert "stays@example.com" in dump
    # The email not yet sent never will be; each row says why, without the address.
    assert query(settings, "SELECT status, status_reason FROM email_outbox WHERE id = 2") == [
        ("failed", "recipient erased on request")
    ]
    reasons = [r[0] for r in query(settings, "SELECT reason FROM email_event WHERE outbox_id = 1")]
    assert reasons == [
        "250 ok for [erased]",
        "recipient, params and texts quoting the address erased on request",
    ]
    # Still suppressed, by its hash; the key that quoted the address stays taken.
    with psycopg.connect(settings.database_url) as conn:
        later = _login(conn, settings, "code-3", "Gone@example.com")
        again = _login(
            conn, settings, "welcome-Gone@Example.com", "Gone@Example.com", name="Gone Person"
        )
        conn.commit()
    assert later.status == "suppressed"
    assert again.created is False
    with psycopg.connect(settings.database_url) as conn:
        batch = enqueue_many(
            conn,
            [{"idempotency_key": f"nl-{i}", "to": to, "template": "newsletter", "params": NEWS}
             for i, to in enumerate(["GONE@example.com", "new@example.com"])],
            settings=settings,
        )  # fmt: skip
        conn.commit()
    assert [r.status for r in batch] == ["suppressed", "pending"]
    # The careful path too (a taken key among them): the hash is looked up there as well.
    with psycopg.connect(settings.database_url) as conn:
        careful = enqueue_many(
            conn,
            [{"idempotency_key": "nl-0", "to": "GONE@example.com", "template": "newsletter",
              "params": NEWS},
             {"idempotency_key": "nl-9", "to": "gone@EXAMPLE.com", "template": "newsletter",
              "params": NEWS}],
            settings=settings,
        )  # fmt: skip
        conn.commit()
    assert [(r.created, r.status) for r in careful] == [(False, "suppressed"), (True, "suppressed")]
    check = outbox(settings, "suppress", "check", "gone@example.com")
    assert check.returncode == 0
    assert "complaint" in check.stdout
    # Forgetting again is harmless.
    assert outbox(settings, "forget", "gone@example.com").returncode == 0


def test_forget_of_an_unknown_address_says_so(settings: Settings) -> None:
    result = outbox(settings, "forget", "nobody@example.com")
    assert result.returncode == 0
    assert result.stdout.startswith("nothing held about ")
    assert "nobody@" not in result.stdout
    assert outbox(settings, "forget", "not an address").returncode == 2


def test_the_erasure_pattern_matches_the_address_literally(settings: Settings) -> None:
    pattern = erasure_pattern("a.b+c@x.example")
    rows = query(
        settings,
        "SELECT 'to A.B+C@X.example!' ~* %s, 'to aXb+c@x.example' ~* %s",
        pattern,
        pattern,
    )
    assert rows == [(True, False)]


def test_the_relays_daily_retention_runs_in_one_relay_at_a_time(settings: Settings) -> None:
    with psycopg.connect(settings.database_url) as conn:
        _login(conn, settings, "old", "a@example.com")
        conn.commit()
    query(settings, f"UPDATE email_outbox SET status = 'sent', sent_at = {OLD},"
                    f" created_at = {OLD} RETURNING id")  # fmt: skip
    retention = Retention(dataclasses.replace(settings, retention_days=30), threading.Event())
    with psycopg.connect(settings.database_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, hashtext(''))", (data_retention.RETENTION_LOCK,))
        assert retention.run_once() is None  # another relay is at it
        other.execute(
            "SELECT pg_advisory_unlock(%s, hashtext(''))", (data_retention.RETENTION_LOCK,)
        )
    purged = retention.run_once()
    assert purged is not None
    assert purged.emails == 1
    assert statuses(settings) == {}
    # The lock was given back: a second relay may run the next day's purge.
    with psycopg.connect(settings.database_url, autocommit=True) as other:
        assert other.execute(
            "SELECT pg_try_advisory_lock(%s, hashtext(''))", (data_retention.RETENTION_LOCK,)
        ).fetchone() == (True,)


AGE_ALL = f"UPDATE email_outbox SET status = 'sent', sent_at = {OLD}, created_at = {OLD}"


def _run(settings: Settings, sql: str) -> None:
    with psycopg.connect(settings.database_url) as conn:
        conn.execute(sql.encode())


def _tombstone_seq_scans(settings: Settings) -> int:
    found = query(
        settings,
        "SELECT seq_scan FROM pg_stat_user_tables WHERE relid = 'email_key_tombstone'::regclass",
    )
    return int(found[0][0])


def test_enqueues_planned_before_a_first_purge_read_its_tombstones_by_the_index(
    settings: Settings,
) -> None:
    # An application's connection keeps a generic plan of enqueue's statement
    # (prepared statements). Planned while the tombstones were empty, as
    # autovacuum leaves a new database, it reads them whole: each enqueue would
    # read every tombstone a purge writes, until the statistics change.
    _run(settings, "ANALYZE email_key_tombstone")
    with psycopg.connect(settings.database_url) as app:
        for i in range(15):  # psycopg prepares at the 5th, Postgres goes generic 5 later
            _login(app, settings, f"before-{i}", "a@example.com")
            app.commit()
        _run(settings, AGE_ALL)
        with psycopg.connect(settings.database_url) as conn:
            enqueue_many(conn, [
                {"idempotency_key": f"old-{i}", "to": f"r{i}@example.com",
                 "template": "newsletter", "params": NEWS} for i in range(3000)
            ], settings=settings)  # fmt: skip
            conn.commit()
        _run(settings, AGE_ALL)
        with psycopg.connect(settings.database_url) as conn:
            purged = data_retention.purge(
                conn, before=dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
            )
        assert purged.emails == 3015
        app.execute("SELECT pg_stat_force_next_flush()")
        app.commit()
        scans = _tombstone_seq_scans(settings)
        for i in range(10):
            _login(app, settings, f"after-{i}", "a@example.com")
            app.commit()
        app.execute("SELECT pg_stat_force_next_flush()")
        app.commit()
    assert _tombstone_seq_scans(settings) == scans  # the index, not a scan per enqueue
