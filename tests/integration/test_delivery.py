"""Delivery in this process against a real SMTP server on loopback."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections.abc import Sequence
from typing import Any

import psycopg
import psycopg.conninfo
import pytest

from outbox import enqueue
from outbox.config import Settings
from outbox.message.return_path import outbox_id_from_token, row_token_from_address
from outbox.models import Priority
from outbox.testing.sink import ACCEPT, Behaviour, Received, SmtpSink
from tests.integration.helpers import add_login, add_newsletter, harness, query, statuses
from tests.keys import SECRET
from tests.lost_answer import LostAnswer


def attempts(settings: Settings, outbox_id: int) -> list[tuple[Any, ...]]:
    return query(
        settings,
        "SELECT attempt, verdict, stage, reply_code, enhanced_status, reply_text"
        " FROM email_attempt WHERE outbox_id = %s ORDER BY id",
        outbox_id,
    )


def test_delivered_with_stored_message_id_and_relay_queue_id(settings: Settings) -> None:
    ids = add_newsletter(settings, 40)
    login = add_login(settings, "login-1", "alice@example.com")
    with harness(settings) as (h, sink):
        h.run()
    assert statuses(settings) == {"sent": 41}
    stored = dict(query(settings, "SELECT message_id, provider_message_id FROM email_outbox"))
    assert sorted(m.message_id or "" for m in sink.messages) == sorted(stored)
    assert all(v and v.startswith("Q") for v in stored.values())
    login_message = next(m for m in sink.messages if m.recipients == ["alice@example.com"])
    assert login_message.mail_from == "no-reply@outbox.localhost"
    assert b"Auto-Submitted: auto-generated" in login_message.data
    assert b"123456" in login_message.data
    bulk_message = next(m for m in sink.messages if m.recipients == ["r0@example.com"])
    assert b"Auto-Submitted" not in bulk_message.data
    assert attempts(settings, login)[0][:4] == (1, "sent", "final_reply", 250)
    events = query(
        settings,
        "SELECT from_status, to_status FROM email_event WHERE outbox_id = %s ORDER BY id",
        ids[0],
    )
    assert events == [("pending", "queued"), ("queued", "sending"), ("sending", "sent")]


def test_greylisting_then_success(settings: Settings) -> None:
    tries = itertools.count()

    def greylist_once(address: str) -> Behaviour:
        if next(tries) == 0:
            return Behaviour(
                rcpt_reply="450 4.7.1 <a@example.com>: Recipient address rejected: Greylisted"
            )
        return ACCEPT

    login = add_login(settings, "login-1", "alice@example.com")
    with harness(settings, greylist_once) as (h, sink):
        started = time.monotonic()
        h.run()
        waited = time.monotonic() - started
    assert statuses(settings) == {"sent": 1}
    rows = attempts(settings, login)
    assert [(r[1], r[2], r[3], r[4]) for r in rows] == [
        ("retry", "rcpt", 450, "4.7.1"),
        ("sent", "final_reply", 250, "2.0.0"),
    ]
    assert waited >= settings.greylist_min_seconds
    assert len(sink.messages) == 1


def test_5yz_fails_at_once_with_the_reply(settings: Settings) -> None:
    unknown = "550 5.1.1 <nobody@example.com>: Recipient address rejected: User unknown"
    login = add_login(settings, "login-1", "nobody@example.com")
    with harness(settings, lambda a: Behaviour(rcpt_reply=unknown)) as (h, sink):
        h.run()
    row = query(
        settings, "SELECT status, attempts, last_error, failed_at IS NOT NULL FROM email_outbox"
    )[0]
    assert row[:2] == ("failed", 1)
    assert "User unknown" in row[2]
    assert row[3]
    assert attempts(settings, login)[0][1:5] == ("failed", "rcpt", 550, "5.1.1")
    assert sink.messages == []


def test_a_recipient_refused_at_rcpt_as_unknown_is_suppressed(settings: Settings) -> None:
    unknown = "550 5.1.1 <nobody@example.com>: Recipient address rejected: User unknown"
    add_login(settings, "login-1", "Nobody@example.com")
    add_login(settings, "login-2", "policy@example.com")
    add_login(settings, "login-3", "nobody@example.com")  # the same address twice in a batch
    refused = {
        "nobody@example.com": unknown,
        "policy@example.com": "550 5.7.1 Message refused by policy",
    }
    with harness(settings, lambda a: Behaviour(rcpt_reply=refused[a.lower()])) as (h, _):
        h.run()
    assert statuses(settings) == {"failed": 3}
    # Only the address said not to exist; a policy refusal says nothing about it.
    assert query(settings, "SELECT address, scope, reason, detail FROM email_suppression") == [
        ("nobody@example.com", "all", "hard_bounce", "refused at RCPT TO: 5.1.1")
    ]
    again = add_login(settings, "login-4", "nobody@example.com")
    assert query(settings, "SELECT status FROM email_outbox WHERE id = %s", again) == [
        ("suppressed",)
    ]


def test_5yz_after_data_fails_too(settings: Settings) -> None:
    add_login(settings, "login-1", "spam@example.com")
    with harness(
        settings, lambda a: Behaviour(data_reply="554 5.7.1 Message rejected as spam")
    ) as (h, _):
        h.run()
    assert statuses(settings) == {"failed": 1}


def test_dead_after_the_attempt_limit(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    settings = dataclasses.replace(settings, max_attempts=3)
    login = add_login(settings, "login-1", "busy@example.com")
    with harness(settings, lambda a: Behaviour(rcpt_reply="421 4.3.2 try later, busy")) as (h, _):
        h.run()
    row = query(settings, "SELECT status, attempts, last_error FROM email_outbox")[0]
    assert row[:2] == ("dead", 3)
    assert "gave up after 3 attempts" in row[2]
    assert [r[1] for r in attempts(settings, login)] == ["retry", "retry", "retry"]
    assert any(r.levelname == "ERROR" and "dead" in r.getMessage() for r in caplog.records)


def test_dead_past_the_age_limit(settings: Settings) -> None:
    settings = dataclasses.replace(settings, max_age_seconds=0.0)
    add_login(settings, "login-1", "busy@example.com")
    with harness(settings, lambda a: Behaviour(rcpt_reply="451 4.3.0 later")) as (h, _):
        h.run()
    row = query(settings, "SELECT status, attempts, last_error FROM email_outbox")[0]
    assert row[:2] == ("dead", 1)
    assert "age" in row[2]


@pytest.mark.parametrize(("policy", "status"), [("retry", "sent"), ("hold", "held")])
def test_dropped_after_data_is_uncertain(settings: Settings, policy: str, status: str) -> None:
    settings = dataclasses.replace(settings, on_uncertain=policy)
    tries = itertools.count()
    login = add_login(settings, "login-1", "alice@example.com")

    def drop_once(address: str) -> Behaviour:
        return Behaviour(drop_after_data=True) if next(tries) == 0 else ACCEPT

    with harness(settings, drop_once) as (h, sink):
        h.run()
    assert statuses(settings) == {status: 1}
    assert attempts(settings, login)[0][1:3] == ("uncertain", "final_reply")
    # The relay did accept the first copy; a retry sends the same Message-ID.
    ids = sink.message_ids()
    assert len(ids) == (2 if policy == "retry" else 1)
    assert len(set(ids)) == 1


def test_duplicate_broker_delivery_sends_nothing(settings: Settings) -> None:
    ids = add_newsletter(settings, 5)
    with harness(settings) as (h, sink):
        h.relay.run_round()
        groups = list(h.groups)
        for group in groups:
            h.delivery.deliver(group)
        for group in groups:  # the broker redelivers every message
            h.delivery.deliver(group)
    assert len(sink.messages) == 5
    assert statuses(settings) == {"sent": 5}
    assert query(settings, "SELECT count(*) FROM email_attempt")[0][0] == len(ids)


def test_smtputf8_recipient(settings: Settings) -> None:
    add_login(settings, "login-1", "jörg@bücher.example")
    add_login(settings, "login-2", "anna@bücher.example")
    with harness(settings) as (h, sink):
        h.run()
    assert statuses(settings) == {"sent": 2}
    recipients = sorted(r for m in sink.messages for r in m.recipients)
    assert recipients == ["anna@xn--bcher-kva.example", "jörg@bücher.example"]


def test_smtputf8_refused_by_a_relay_without_it(settings: Settings) -> None:
    add_login(settings, "login-1", "jörg@example.de")
    with harness(settings, smtputf8=False) as (h, _):
        h.run()
    row = query(settings, "SELECT status, last_error FROM email_outbox")[0]
    assert row[0] == "failed"
    assert "SMTPUTF8" in row[1]


def test_relay_down_retries_then_delivers(settings: Settings) -> None:
    login = add_login(settings, "login-1", "alice@example.com")
    with harness(settings, started=False) as (h, sink):  # connection refused
        h.relay.run_round()
        h.delivery.deliver(h.groups.pop())
        assert statuses(settings) == {"pending": 1}
        with sink:
            h.run()
    # A refused connection is our path failing, not an attempt at this message.
    assert [r[:2] for r in attempts(settings, login)] == [(1, "sent")]
    returned = query(
        settings,
        "SELECT reason FROM email_event WHERE outbox_id = %s AND from_status = 'sending'"
        " ORDER BY id",
        login,
    )
    assert "not an attempt, sending path failed: connection refused at connect" in returned[0][0]
    assert len(sink.messages) == 1


@pytest.mark.slow
def test_slow_relay_times_out_without_blocking_forever(settings: Settings) -> None:
    login = add_login(settings, "login-1", "slow@example.com")
    settings = dataclasses.replace(settings, max_attempts=1)
    with harness(settings, lambda a: Behaviour(delay=5)) as (h, _):
        h.run()
    # Ended by the 2 s command timeout: a client that waited the 5 s out got a 250.
    assert attempts(settings, login)[0][1:3] == ("uncertain", "final_reply")
    assert "timeout" in attempts(settings, login)[0][5]


def test_stopping_worker_hands_back_untried_rows(settings: Settings) -> None:
    add_newsletter(settings, 10)
    with harness(settings) as (h, sink):
        h.relay.run_round()
        h.delivery.stopping.set()
        h.delivery.deliver(h.groups.pop(0))
    assert len(sink.messages) == 0
    assert statuses(settings) == {"pending": 10}
    assert query(settings, "SELECT max(attempts) FROM email_outbox")[0][0] == 0


def test_message_arriving_before_the_relay_commits_is_still_sent(settings: Settings) -> None:
    add_newsletter(settings, 3)
    with harness(settings) as (h, sink):
        workers: list[threading.Thread] = []

        def publish_and_linger(priority: Priority, groups: Sequence[Sequence[int]]) -> None:
            # The worker gets the message at once; the relay commits 0.5 s later.
            for group in groups:
                worker = threading.Thread(target=h.delivery.deliver, args=(list(group),))
                worker.start()
                workers.append(worker)
            time.sleep(0.5)

        h.relay.publish = publish_and_linger
        h.relay.run_round()
        for worker in workers:
            worker.join(timeout=10)
    assert statuses(settings) == {"sent": 3}
    assert len(sink.messages) == 3


def test_verp_return_path_names_the_row(settings: Settings) -> None:
    settings = dataclasses.replace(settings, bounce_domain="bounces.shop.example", secret=SECRET)
    login = add_login(settings, "login-1", "alice@example.com")
    with harness(settings) as (h, sink):
        h.run()
    mail_from = sink.messages[0].mail_from
    token = row_token_from_address(mail_from)
    assert mail_from.endswith("@bounces.shop.example")
    assert token is not None
    assert outbox_id_from_token(token, secret=SECRET) == login
    # The From header still shows the configured sender.
    assert b"From: Outbox <no-reply@outbox.localhost>" in sink.messages[0].data


def test_the_sender_is_the_applications_not_the_workers(settings: Settings) -> None:
    # OUTBOX_FROM is read where the email is written: a worker started with
    # another (or the default) setting still sends what the application chose.
    app = dataclasses.replace(settings, sender="Shop Billing <billing@shop.example>")
    with psycopg.connect(settings.database_url) as conn:
        enqueue(
            conn,
            idempotency_key="order-1-confirmation",
            to="carol@example.com",
            template="login_code",
            params={"name": "Carol", "code": "111222", "product": "Shop", "minutes": 5},
            priority="high",
            settings=app,
        )
        conn.commit()
    assert query(settings, "SELECT sender FROM email_outbox") == [
        ("Shop Billing <billing@shop.example>",)
    ]
    with harness(settings) as (h, sink):  # the worker's OUTBOX_FROM is the default
        h.run()
    (message,) = sink.messages
    assert b"From: Shop Billing <billing@shop.example>\r\n" in message.data
    assert message.mail_from == "billing@shop.example"


def test_rows_enqueued_before_senders_were_recorded_take_the_workers(settings: Settings) -> None:
    login = add_login(settings, "login-old", "dave@example.com")
    with psycopg.connect(settings.database_url) as conn:
        conn.execute("UPDATE email_outbox SET sender = NULL WHERE id = %s", (login,))
    with harness(settings) as (h, sink):
        h.run()
    (message,) = sink.messages
    assert b"From: Outbox <no-reply@outbox.localhost>\r\n" in message.data


def test_a_batch_that_fails_hands_back_its_untried_rows(settings: Settings) -> None:
    ids = add_newsletter(settings, 5)
    with harness(settings) as (h, sink):
        h.relay.run_round()
        calls = 0
        gate = h.delivery.breaker.gate

        def failing_gate() -> Any:
            nonlocal calls
            calls += 1
            if calls == 3:
                raise RuntimeError("the breaker could not be read")
            return gate()

        h.delivery.breaker.gate = failing_gate  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            h.delivery.deliver(h.groups.pop())
    # Two sent; the three the batch never reached are pending again, without an attempt:
    # a live worker holds no row that no sweep would return.
    assert statuses(settings) == {"sent": 2, "pending": 3}
    assert len(sink.messages) == 2
    charged = dict(query(settings, "SELECT id, attempts FROM email_outbox"))
    assert [charged[i] for i in ids] == [1, 1, 0, 0, 0]


class _CheckingSink(SmtpSink):
    """A sink that, as each message's data arrives (after its end-of-data dot),
    reads what Postgres holds for the messages it received before."""

    def __init__(self, database_url: str) -> None:
        super().__init__()
        self.database_url = database_url
        self.uncommitted: list[tuple[str, str]] = []

    def record(self, received: Received) -> str:
        earlier = [r for m in self.messages for r in m.recipients]
        if earlier:
            with psycopg.connect(self.database_url) as conn:
                rows = conn.execute(
                    "SELECT recipient, status FROM email_outbox WHERE recipient = ANY(%s)",
                    (earlier,),
                ).fetchall()
            self.uncommitted += [(r, s) for r, s in rows if s != "sent"]
        return super().record(received)


def test_each_result_is_committed_before_the_next_message_leaves(settings: Settings) -> None:
    # One thread, one batch: a kill at any moment resends at most the message in flight.
    ids = add_newsletter(settings, 12)
    with (
        _CheckingSink(settings.database_url) as sink,
        harness(settings, smtp_url=sink.url, started=False) as (h, _unused),
    ):
        h.run()
    assert len(sink.messages) == len(ids)
    assert len(h.groups) == 0
    assert sink.uncommitted == []
    assert statuses(settings) == {"sent": 12}


def test_a_take_whose_commit_went_unanswered_sends_what_it_took(settings: Settings) -> None:
    # The take committed, the worker heard nothing (Postgres restarted, the
    # network dropped): its retry must find the rows it holds, not skip them.
    ids = add_newsletter(settings, 5)
    params = psycopg.conninfo.conninfo_to_dict(settings.database_url)
    front = LostAnswer((str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432)))
    through = dataclasses.replace(settings, database_url=front.url(settings.database_url))
    try:
        with harness(through) as (h, sink):
            h.relay.run_round()
            (group,) = h.groups
            front.arm(b"COMMIT")  # the take's commit: made, its answer lost
            h.delivery.deliver(group)
            assert front.cut.is_set()
            assert h.delivery.in_hand() == set()
    finally:
        front.close()
    assert sorted(group) == sorted(ids)
    assert statuses(settings) == {"sent": 5}
    assert len(sink.messages) == 5
