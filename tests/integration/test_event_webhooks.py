"""Signed event webhooks end to end: a Standard Webhooks receiver gets every
event of a run once per id, after an outage too; failing endpoints pause."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import smtplib
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg_pool import ConnectionPool

import outbox
from outbox import enqueue
from outbox.bounce_receiving.smtp_server import BounceServer
from outbox.config import Settings
from outbox.db.store import data_retention, webhook_rows
from outbox.events.hook_delivery import Deliverer
from outbox.events.hook_metrics import WebhookCollector
from outbox.message.return_path import return_path
from outbox.testing.sink import ACCEPT, Behaviour, SmtpSink
from outbox.testing.webhook_receiver import WebhookReceiver
from tests.integration.helpers import LOGIN, harness, query, wait_until
from tests.integration.test_bounces import BOUNCE_DOMAIN, arf, dsn
from tests.keys import SECRET


@pytest.fixture
def wsettings(settings: Settings) -> Settings:
    return dataclasses.replace(
        settings,
        secret=SECRET,
        bounce_domain=BOUNCE_DOMAIN,
        bounce_port=SmtpSink().port,
        webhook_allow_private="1",  # the receiver listens on loopback
        webhook_timeout=5.0,
    )


def cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings.to_env()}
    return subprocess.run(
        [sys.executable, "-m", "outbox.cli", "webhooks", *args],
        check=False, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def create_endpoint(settings: Settings, receiver: WebhookReceiver, *extra: str) -> int:
    done = cli(settings, "create", receiver.url, *extra)
    assert done.returncode == 0, done.stderr
    endpoint, secret = done.stdout.split()
    assert secret.startswith("whsec_")
    assert secret not in cli(settings, "list").stdout
    receiver.secret = secret
    return int(endpoint)


@contextmanager
def delivering(settings: Settings) -> Iterator[Deliverer]:
    deliverer = Deliverer(settings)
    stop = threading.Event()
    thread = threading.Thread(target=deliverer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield deliverer
    finally:
        stop.set()
        thread.join(timeout=30)
        assert not thread.is_alive()


def add(settings: Settings, key: str, to: str) -> int:
    with psycopg.connect(settings.database_url) as conn:
        return enqueue(
            conn,
            idempotency_key=key,
            to=to,
            template="login_code",
            params=LOGIN,
            priority="high",
            settings=settings,
        ).id


def refuse_one(address: str) -> Behaviour:
    if address.startswith("refused@"):
        return Behaviour(rcpt_reply="550 5.7.1 <refused@example.net>: policy says no")
    return ACCEPT


def report(settings: Settings, envelope_to: str, raw: bytes) -> None:
    with smtplib.SMTP("127.0.0.1", settings.bounce_port, timeout=10) as client:
        client.sendmail("", [envelope_to], raw)


def test_a_receiver_gets_every_event_of_a_run_once_each(wsettings: Settings) -> None:
    settings = wsettings
    with WebhookReceiver() as receiver:
        endpoint = create_endpoint(settings, receiver)
        sent = add(settings, "sent", "alice@example.net")
        refused = add(settings, "refused", "refused@example.net")
        bounced = add(settings, "bounced", "gone@example.net")
        complained = add(settings, "complained", "annoyed@example.net")
        cancelled = add(settings, "cancelled", "bob@example.net")
        with psycopg.connect(settings.database_url) as conn:
            assert outbox.cancel(conn, "cancelled", reason="order refunded", by="test")
        with harness(settings, refuse_one) as (h, _sink):
            h.run()
        message_ids = dict(query(settings, "SELECT id, message_id FROM email_outbox"))
        verp = return_path(bounced, domain=BOUNCE_DOMAIN, secret=SECRET)
        complaint_path = return_path(complained, domain=BOUNCE_DOMAIN, secret=SECRET)
        with (
            ConnectionPool(settings.database_url, min_size=1, max_size=2) as pool,
            delivering(settings),
        ):
            server = BounceServer(settings, pool)
            server.start()
            try:
                report(settings, verp, dsn("gone@example.net", message_ids[bounced], to=verp))
                fbl = "fbl@" + BOUNCE_DOMAIN
                report(
                    settings,
                    fbl,
                    arf("annoyed@example.net", message_ids[complained], complaint_path),
                )
            finally:
                server.stop()
            wait_until(lambda: len(receiver.delivered) >= 7, timeout=30)
            wait_until(lambda: _waiting(settings) == 0, timeout=10)
    got = [(d.payload["data"]["id"], d.payload["type"]) for d in receiver.delivered]
    assert sorted(got) == sorted(
        [
            (sent, "email.sent"),
            (refused, "email.failed"),
            (bounced, "email.sent"),
            (bounced, "email.bounced"),
            (complained, "email.sent"),
            (complained, "email.complained"),
            (cancelled, "email.cancelled"),
        ]
    )
    assert receiver.unverified == 0
    ids = receiver.ids()
    assert len(ids) == len(set(ids)) == 7  # once per id
    by_email = {d.payload["data"]["id"]: d.payload for d in receiver.delivered}
    assert by_email[bounced]["data"]["bounce_class"] == "hard"
    assert by_email[bounced]["data"]["reason"] == "hard bounce 5.1.1 (verp)"
    assert "alice" not in str(by_email[sent])  # `to` is the keyed tag
    first = next(d for d in receiver.delivered if d.payload["data"]["id"] == sent).payload
    assert first["data"]["provider_id"].startswith("Q")
    order = [d.payload["type"] for d in receiver.delivered if d.payload["data"]["id"] == bounced]
    assert order == ["email.sent", "email.bounced"]
    # The feed serves the same events, under the same ids.
    with psycopg.connect(settings.database_url) as conn:
        feed = outbox.read_events(conn, settings=settings)
    assert {e["id"] for e in feed} == set(ids)
    assert {e["id"]: {k: e[k] for k in ("type", "timestamp", "data")} for e in feed} == {
        d.webhook_id: d.payload for d in receiver.delivered
    }
    listed = cli(settings, "list").stdout
    assert f"{endpoint}  http://127.0.0.1" in listed
    assert "delivered 7" in listed


def execute(settings: Settings, sql: str, *args: object) -> None:
    with psycopg.connect(settings.database_url) as conn:
        conn.execute(sql.encode(), args or None)


def _waiting(settings: Settings) -> int:
    return int(query(settings, "SELECT count(*) FROM webhook_delivery")[0][0])


def _move_clock(settings: Settings) -> None:
    """Every delivery's next try is due now: the schedule's hours pass at once."""
    execute(settings, "UPDATE webhook_delivery SET next_attempt_at = now() - interval '1 second'")


def _attempts(settings: Settings) -> list[int]:
    return [r[0] for r in query(settings, "SELECT attempts FROM webhook_delivery ORDER BY id")]


def test_an_endpoint_down_for_two_hours_gets_everything_when_back(wsettings: Settings) -> None:
    settings = wsettings
    with WebhookReceiver(status=503) as receiver:
        create_endpoint(settings, receiver)
        rows = [add(settings, f"k{i}", f"r{i}@example.net") for i in range(4)]
        for row in rows[:2]:
            execute(settings, "UPDATE email_outbox SET status = 'sent' WHERE id = %s", row)
        with psycopg.connect(settings.database_url) as conn:
            outbox.cancel(conn, "k2", reason="changed my mind", by="test")
        with delivering(settings):
            # Down: tries at once, then after 5 s, 5 min, 30 min and 2 h (the
            # clock moved by the database), all failing.
            wait_until(lambda: _attempts(settings) == [1, 1, 1], timeout=20)
            for failures in (2, 3, 4, 5):
                _move_clock(settings)
                wait_until(lambda f=failures: _attempts(settings) == [f] * 3, timeout=20)  # type: ignore[misc]
            assert receiver.delivered == []
            execute(settings, "UPDATE email_outbox SET status = 'failed' WHERE id = %s", rows[3])
            receiver.status = 200  # back
            _move_clock(settings)
            wait_until(lambda: len(receiver.delivered) == 4, timeout=20)
            wait_until(lambda: _waiting(settings) == 0, timeout=10)
    got = sorted((d.payload["data"]["id"], d.payload["type"]) for d in receiver.delivered)
    assert got == [
        (rows[0], "email.sent"),
        (rows[1], "email.sent"),
        (rows[2], "email.cancelled"),
        (rows[3], "email.failed"),
    ]
    tries = Counter(receiver.attempts)
    # The same webhook-id on every try: five failed ones, then the one delivered.
    assert sorted(tries.values()) == [1, 6, 6, 6]
    assert len(set(receiver.ids())) == 4


def test_past_the_schedule_the_endpoint_pauses_and_says_why(wsettings: Settings) -> None:
    settings = wsettings
    with WebhookReceiver(status=500) as receiver:
        endpoint = create_endpoint(settings, receiver)
        row = add(settings, "k", "r@example.net")
        execute(settings, "UPDATE email_outbox SET status = 'sent' WHERE id = %s", row)
        with delivering(settings):
            for failures in range(1, 9):
                if failures > 1:
                    _move_clock(settings)
                wait_until(lambda f=failures: _attempts(settings) == [f], timeout=20)  # type: ignore[misc]
            wait_until(lambda: _state(settings, endpoint)[0] == "paused", timeout=10)
            _move_clock(settings)
            listed = cli(settings, "list").stdout
            assert "paused (evt_1 failed 8 times, last: HTTP 500)" in listed
            assert _attempts(settings) == [8]  # paused: no more tries
            figures = _metrics(settings)
            assert figures[("outbox_webhook_paused", str(endpoint))] == 1
            assert figures[("outbox_webhook_failed_total", str(endpoint))] == 8
            assert figures[("outbox_webhook_waiting", str(endpoint))] == 1
            assert figures[("outbox_webhook_lag_seconds", str(endpoint))] > 0
            receiver.status = 200
            assert cli(settings, "enable", str(endpoint)).returncode == 0
            wait_until(lambda: len(receiver.delivered) == 1, timeout=20)
    assert Counter(receiver.attempts) == {"evt_1": 9}
    figures = _metrics(settings)
    assert figures[("outbox_webhook_paused", str(endpoint))] == 0
    assert figures[("outbox_webhook_delivered_total", str(endpoint))] == 1
    assert figures[("outbox_webhook_lag_seconds", str(endpoint))] == 0


def _metrics(settings: Settings) -> dict[tuple[str, str], float]:
    collector = WebhookCollector(settings.database_url)
    try:
        return {
            (sample.name, sample.labels["endpoint"]): sample.value
            for family in collector.collect()
            for sample in family.samples
            if not sample.name.endswith("_created")
        }
    finally:
        collector.close()


def test_a_410_disables_the_endpoint_and_drops_what_waited(wsettings: Settings) -> None:
    settings = wsettings
    with WebhookReceiver(status=410) as receiver:
        endpoint = create_endpoint(settings, receiver)
        row = add(settings, "k", "r@example.net")
        execute(settings, "UPDATE email_outbox SET status = 'sent' WHERE id = %s", row)
        with delivering(settings):
            wait_until(lambda: _state(settings, endpoint)[0] == "disabled", timeout=20)
    assert _state(settings, endpoint) == ("disabled", "it answered 410 Gone")
    assert _waiting(settings) == 0
    assert receiver.delivered == []


def test_types_filter_addresses_and_a_rotated_secret_both_sign(wsettings: Settings) -> None:
    settings = wsettings
    with WebhookReceiver() as receiver, WebhookReceiver() as everything:
        create_endpoint(settings, receiver, "--events", "email.failed", "--addresses")
        whole = create_endpoint(settings, everything)
        old_secret = everything.secret
        rotated = cli(settings, "rotate-secret", str(whole))
        assert rotated.returncode == 0, rotated.stderr
        new_secret = rotated.stdout.strip()
        rows = [add(settings, f"k{i}", f"r{i}@example.net") for i in range(2)]
        execute(settings, "UPDATE email_outbox SET status = 'sent' WHERE id = %s", rows[0])
        execute(settings, "UPDATE email_outbox SET status = 'failed' WHERE id = %s", rows[1])
        with delivering(settings):
            wait_until(lambda: len(everything.delivered) == 2, timeout=20)
            wait_until(lambda: len(receiver.delivered) == 1, timeout=20)
            everything.secret = new_secret  # either secret verifies during the grace
            replayed = cli(settings, "replay", str(whole), "--since", "1h")
            assert replayed.stdout.strip() == f"2 events to deliver again to endpoint {whole}"
            wait_until(lambda: len(everything.delivered) == 4, timeout=20)
    assert old_secret != new_secret
    [failed] = receiver.delivered
    assert failed.payload["type"] == "email.failed"
    assert failed.payload["data"]["to"] == "r1@example.net"
    assert everything.unverified == receiver.unverified == 0
    assert Counter(everything.ids()) == {"evt_1": 2, "evt_2": 2}  # a replay keeps the ids


def test_many_events_keep_their_order_per_email(wsettings: Settings) -> None:
    settings = dataclasses.replace(wsettings, webhook_concurrency=8)
    with WebhookReceiver(delay=0.01) as receiver:
        create_endpoint(settings, receiver)
        rows = [add(settings, f"k{i}", f"r{i}@example.net") for i in range(30)]
        # Each email: sent, then three verdicts recorded on it.
        execute(settings, "UPDATE email_outbox SET status = 'sent' WHERE id = ANY(%s)", rows)
        for kind in ("email.bounced", "email.complained", "email.unsubscribed"):
            execute(
                settings,
                "INSERT INTO outbox_event (outbox_id, type, status) SELECT id, %s, 'sent'"
                " FROM email_outbox",
                kind,
            )
        with delivering(settings):
            wait_until(lambda: len(receiver.delivered) == 120, timeout=60)
    for row in rows:
        kinds = [d.payload["type"] for d in receiver.delivered if d.payload["data"]["id"] == row]
        assert kinds == ["email.sent", "email.bounced", "email.complained", "email.unsubscribed"]


def _state(settings: Settings, endpoint: int) -> tuple[str, str | None]:
    with psycopg.connect(settings.database_url) as conn:
        found = {e.id: e for e in webhook_rows.list_endpoints(conn)}
    return found[endpoint].state, found[endpoint].state_reason


def test_retention_keeps_an_email_until_its_events_are_delivered(wsettings: Settings) -> None:
    settings = wsettings
    with WebhookReceiver() as receiver:
        endpoint = create_endpoint(settings, receiver)
        delivered, waiting = (add(settings, f"k{i}", f"r{i}@example.net") for i in range(2))
        execute(settings, "UPDATE email_outbox SET status = 'sent' WHERE id = %s", delivered)
        with delivering(settings):
            wait_until(lambda: len(receiver.delivered) == 1, timeout=20)
        receiver.status = 503
        execute(settings, "UPDATE email_outbox SET status = 'sent' WHERE id = %s", waiting)
        with delivering(settings):
            wait_until(lambda: _attempts(settings) == [1], timeout=20)
    old = "now() - interval '40 days'"
    execute(settings, f"UPDATE email_outbox SET created_at = {old}, sent_at = {old}")
    with psycopg.connect(settings.database_url) as conn:
        purged = data_retention.purge(conn, before=dt.datetime.now(dt.UTC) - dt.timedelta(days=30))
    assert purged.emails == 1
    assert query(settings, "SELECT id FROM email_outbox") == [(waiting,)]
    assert query(settings, "SELECT outbox_id FROM outbox_event") == [(waiting,)]
    assert cli(settings, "disable", str(endpoint)).stdout.strip() == "disabled"
    with psycopg.connect(settings.database_url) as conn:
        purged = data_retention.purge(conn, before=dt.datetime.now(dt.UTC) - dt.timedelta(days=30))
    assert purged.emails == 1
    assert query(settings, "SELECT count(*) FROM outbox_event") == [(0,)]


def _last_error(settings: Settings) -> str | None:
    found = query(settings, "SELECT last_error FROM webhook_delivery")
    return found[0][0] if found else None


def test_a_loopback_endpoint_is_not_called_unless_allowed(wsettings: Settings) -> None:
    settings = dataclasses.replace(wsettings, webhook_allow_private="0")
    with WebhookReceiver() as receiver:
        create_endpoint(settings, receiver)
        row = add(settings, "k", "r@example.net")
        execute(settings, "UPDATE email_outbox SET status = 'sent' WHERE id = %s", row)
        with delivering(settings):
            wait_until(lambda: _attempts(settings) == [1], timeout=20)
    assert receiver.attempts == []
    assert "loopback" in (_last_error(settings) or "")


def test_a_redirect_is_not_followed_and_a_slow_answer_times_out(wsettings: Settings) -> None:
    settings = dataclasses.replace(wsettings, webhook_timeout=0.5)
    with WebhookReceiver(status=302) as receiver:
        endpoint = create_endpoint(settings, receiver)
        row = add(settings, "k", "r@example.net")
        execute(settings, "UPDATE email_outbox SET status = 'sent' WHERE id = %s", row)
        with delivering(settings):
            wait_until(lambda: receiver.attempts == ["evt_1"], timeout=20)
            wait_until(lambda: _waiting(settings) == 0, timeout=20)  # refused for good
            assert _state(settings, endpoint) == ("enabled", None)
            receiver.status, receiver.delay = 200, 2.0
            execute(settings, "UPDATE email_outbox SET status = 'cancelled'")
            wait_until(lambda: _attempts(settings) == [1], timeout=20)
    assert _last_error(settings) == "timed out"
    assert receiver.attempts[0] == "evt_1"  # the redirect, tried once


def test_create_refuses_what_cannot_be_an_endpoint_and_writes_nothing(
    wsettings: Settings,
) -> None:
    for url, said in (
        ("ftp://hooks.example.com/x", "http:// or https://"),
        ("https://user:pw@hooks.example.com/x", "credentials"),
    ):
        done = cli(wsettings, "create", url)
        assert done.returncode == 2
        assert said in done.stderr
        assert "pw" not in done.stderr
    unknown = cli(wsettings, "create", "https://hooks.example.com/x", "--events", "email.opened")
    assert unknown.returncode == 2
    assert "unknown event type 'email.opened'" in unknown.stderr
    plain = dataclasses.replace(wsettings, secret="", bounce_domain="")
    no_secret = cli(plain, "create", "https://h.example.com/")
    assert no_secret.returncode == 2
    assert "need OUTBOX_SECRET" in no_secret.stderr
    assert query(wsettings, "SELECT count(*) FROM webhook_endpoint") == [(0,)]
    assert cli(wsettings, "disable", "99").stdout.strip() == "no webhook endpoint 99"
