"""The Procfile's processes as child processes, end to end."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import psycopg
import pytest

from outbox import enqueue
from outbox.config import Settings
from outbox.testing.pipeline import Pipeline
from outbox.testing.sink import SmtpSink
from tests.integration.helpers import (
    LOGIN,
    add_newsletter,
    median_gap,
    query,
    statuses,
    wait_until,
)

# The Procfile's processes as children, each test a scenario of seconds.
pytestmark = pytest.mark.slow


def env_for(settings: Settings, sink: SmtpSink) -> dict[str, str]:
    return {**dataclasses.replace(settings, smtp_url=sink.url).to_env(), "OUTBOX_LOG_LEVEL": "INFO"}


def test_end_to_end_through_relay_and_worker_processes(broker_of: Settings, tmp_path: Path) -> None:
    settings = broker_of
    add_newsletter(settings, 300)
    with SmtpSink() as sink, Pipeline(env_for(settings, sink), log_dir=tmp_path):
        wait_until(lambda: statuses(settings) == {"sent": 300}, timeout=60)
    ids = sink.message_ids()
    assert len(ids) == 300
    assert set(ids) == {r[0] for r in query(settings, "SELECT message_id FROM email_outbox")}


def test_two_relays_and_two_worker_processes_send_each_row_once(
    broker_of: Settings, tmp_path: Path
) -> None:
    settings = broker_of
    add_newsletter(settings, 2000)
    # A small window keeps both relays claiming for the whole run.
    settings = dataclasses.replace(settings, claim_batch=50, bulk_batch=10, max_in_flight=150)
    with (
        SmtpSink() as sink,
        Pipeline(env_for(settings, sink), relays=2, high=(0, 0), bulk=(2, 4), log_dir=tmp_path),
    ):
        wait_until(lambda: statuses(settings) == {"sent": 2000}, timeout=120)
    ids = sink.message_ids()
    assert len(ids) == 2000
    assert len(set(ids)) == 2000
    relays = {
        r[0] for r in query(settings, "SELECT actor FROM email_event WHERE to_status = 'queued'")
    }
    workers = {
        r[0]
        for r in query(settings, "SELECT DISTINCT split_part(worker, ':', 2) FROM email_attempt")
    }
    assert len(relays) == 2  # both relays published
    assert len(workers) == 2  # both worker processes sent
    assert query(settings, "SELECT count(*) FROM email_attempt")[0][0] == 2000


def test_login_code_overtakes_a_bulk_backlog(broker_of: Settings, tmp_path: Path) -> None:
    settings = broker_of
    add_newsletter(settings, 10_000)
    with (
        SmtpSink() as sink,
        Pipeline(env_for(settings, sink), high=(1, 2), bulk=(1, 8), log_dir=tmp_path),
    ):
        wait_until(lambda: len(sink.messages) >= 200, timeout=60)  # the backlog is draining
        with psycopg.connect(settings.database_url) as conn:
            login = enqueue(
                conn,
                idempotency_key="login",
                to="alice@example.com",
                template="login_code",
                params=LOGIN,
                priority="high",
                settings=settings,
            )
            conn.commit()
        wait_until(lambda: login.message_id in sink.message_ids(), timeout=30, interval=0.01)
        bulk_left = query(settings, "SELECT count(*) FROM email_outbox WHERE status <> 'sent'")[0][
            0
        ]
    assert bulk_left > 1000  # it did not wait for the newsletter


def test_receiver_rates_hold_across_two_worker_processes(
    settings: Settings, tmp_path: Path
) -> None:
    add_newsletter(settings, 40, domain="gmail.com")
    add_newsletter(settings, 40, prefix="ms", domain="hotmail.com")
    add_newsletter(settings, 100, prefix="other", domain="example.org")
    settings = dataclasses.replace(settings, rate_limits="gmail.com=10/s, outlook.com=5/s")
    with (
        SmtpSink() as sink,
        Pipeline(env_for(settings, sink), high=(0, 0), bulk=(2, 4), log_dir=tmp_path),
    ):
        wait_until(lambda: statuses(settings) == {"sent": 180}, timeout=60)
    workers = query(
        settings, "SELECT count(DISTINCT split_part(worker, ':', 2)) FROM email_attempt"
    )
    assert workers == [(2,)]  # both processes sent, sharing the rates through Redis
    by_domain: dict[str, list[float]] = {}
    for message in sink.messages:
        by_domain.setdefault(message.recipients[0].rpartition("@")[2], []).append(message.at)
    gmail, hotmail = sorted(by_domain["gmail.com"]), sorted(by_domain["hotmail.com"])
    # Evenly spaced: 40 sends at 10/s span 3.9 s, at 5/s 7.8 s (a little less for
    # arrival jitter), most of them one interval apart; two processes that did not
    # share the rates would have sent twice as fast.
    assert gmail[-1] - gmail[0] >= 3.5
    assert hotmail[-1] - hotmail[0] >= 7.0
    assert median_gap(gmail) >= 0.75 / 10
    assert median_gap(hotmail) >= 0.75 / 5
    assert query(settings, "SELECT max(attempt) FROM email_attempt") == [(1,)]
