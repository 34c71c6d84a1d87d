from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence

import pytest
import redis

from outbox.broker import make_broker
from outbox.config import Settings
from outbox.db.store import relaying, sending
from outbox.models import Priority
from outbox.relay.broker_watch import broker_watch
from outbox.relay.loop import Relay
from outbox.relay.publish import Publisher
from tests.integration import helpers
from tests.integration.helpers import add_newsletter, pool, query, statuses

# A poll interval no test outlasts: whatever wakes the relay during a test is not the poll.
NEVER = 3600.0


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.published: list[tuple[Priority, list[int]]] = []
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, priority: Priority, groups: Sequence[Sequence[int]]) -> None:
        if self.fail:
            raise ConnectionError("broker away")
        with self.lock:
            self.published += [(priority, list(g)) for g in groups]

    def ids(self) -> list[int]:
        return [i for _, group in self.published for i in group]


def add_login(settings: Settings, key: str = "login") -> int:
    return helpers.add_login(settings, key, "a@example.com")


def test_high_first_login_codes_alone_bulk_in_batches(settings: Settings) -> None:
    settings = dataclasses.replace(settings, bulk_batch=10)
    bulk = add_newsletter(settings, 35)
    login = add_login(settings)
    recorder = Recorder()
    with pool(settings) as p:
        relay = Relay(settings, p, recorder)
        result = relay.run_round()
    assert result.published == 36
    assert recorder.published[0] == (Priority.HIGH, [login])
    assert [len(g) for _, g in recorder.published[1:]] == [10, 10, 10, 5]
    assert sorted(recorder.ids()) == sorted([*bulk, login])
    assert statuses(settings) == {"queued": 36}
    events = query(settings, "SELECT from_status, to_status, reason FROM email_event")
    assert set(events) == {("pending", "queued", "published by relay")}


def test_backpressure_keeps_only_a_window_in_flight(settings: Settings) -> None:
    settings = dataclasses.replace(settings, max_in_flight=100, claim_batch=40)
    add_newsletter(settings, 250)
    recorder = Recorder()
    with pool(settings) as p:
        relay = Relay(settings, p, recorder)
        for _ in range(10):
            relay.run_round()
        assert len(recorder.ids()) == 100
        assert relay.run_round().saturated
        # Workers finish 30 rows: room for 30 more.
        query(
            settings,
            "UPDATE email_outbox SET status = 'sent' WHERE id IN "
            "(SELECT id FROM email_outbox WHERE status = 'queued' LIMIT 30) RETURNING id",
        )
        relay.run_round()
    assert len(recorder.ids()) == 130
    assert statuses(settings) == {"queued": 100, "sent": 30, "pending": 120}


def test_failed_publish_leaves_rows_pending(settings: Settings) -> None:
    add_newsletter(settings, 20)
    with pool(settings) as p, pytest.raises(ConnectionError):
        Relay(settings, p, Recorder(fail=True)).run_round()
    assert statuses(settings) == {"pending": 20}


def test_a_claim_rolled_back_after_publishing_is_claimed_again_and_taken_once(
    settings: Settings,
) -> None:
    # A relay that dies between publishing and committing: its rows are pending
    # again; the stale message takes nothing, and the claim made anew is taken once.
    ids = add_newsletter(settings, 3)
    with pool(settings) as p:
        with p.connection() as conn:
            stale = [c.id for c in relaying.claim_due(conn, priority="bulk", limit=10, relay="r")]
            conn.rollback()
        assert sorted(stale) == sorted(ids)
        with p.connection() as conn:
            assert sending.take_for_sending(conn, stale, "w:stale") == []
        recorder = Recorder()
        Relay(settings, p, recorder).run_round()
        with p.connection() as conn:
            assert len(sending.take_for_sending(conn, recorder.ids(), "w:1")) == 3
        with p.connection() as conn:
            assert sending.take_for_sending(conn, stale, "w:stale") == []
    assert sorted(recorder.ids()) == sorted(ids)
    assert statuses(settings) == {"sending": 3}
    assert query(settings, "SELECT DISTINCT locked_by FROM email_outbox") == [("w:1",)]


def test_rows_not_yet_due_wait(settings: Settings) -> None:
    add_newsletter(settings, 5)
    query(
        settings,
        "UPDATE email_outbox SET next_attempt_at = now() + interval '1 hour' "
        "WHERE id <= 2 RETURNING id",
    )
    recorder = Recorder()
    with pool(settings) as p:
        Relay(settings, p, recorder).run_round()
    assert sorted(recorder.ids()) == [3, 4, 5]


def test_two_relays_racing_publish_each_row_once(settings: Settings) -> None:
    settings = dataclasses.replace(settings, claim_batch=50, max_in_flight=100_000)
    add_newsletter(settings, 3000)
    recorder = Recorder()
    with pool(settings) as p1, pool(settings) as p2:
        relays = [
            Relay(settings, p1, recorder, name="r1"),
            Relay(settings, p2, recorder, name="r2"),
        ]

        def drain(relay: Relay) -> None:
            while relay.run_round().published:
                pass

        threads = [threading.Thread(target=drain, args=(r,)) for r in relays]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    ids = recorder.ids()
    assert len(ids) == 3000
    assert len(set(ids)) == 3000
    by_relay = dict(query(settings, "SELECT locked_by, count(*) FROM email_outbox GROUP BY 1"))
    assert set(by_relay) == {"r1", "r2"}  # both did real work


def test_sweeper_returns_stuck_rows(settings: Settings) -> None:
    settings = dataclasses.replace(settings, stuck_seconds=60, max_attempts=3)
    add_newsletter(settings, 9)
    query(
        settings,
        "UPDATE email_outbox SET status = 'queued', locked_by = 'r', locked_at = now() "
        "- interval '2 minutes' WHERE id IN (1, 2, 7) RETURNING id",
    )
    query(
        settings,
        "UPDATE email_outbox SET status = 'sending', locked_by = 'w', attempts = 1, "
        "locked_at = now() - interval '2 minutes' WHERE id IN (3, 4) RETURNING id",
    )
    query(
        settings,
        "UPDATE email_outbox SET status = 'sending', locked_by = 'w', attempts = 3, "
        "locked_at = now() - interval '2 minutes' WHERE id = 5 RETURNING id",
    )
    query(
        settings,
        "UPDATE email_outbox SET status = 'sending', locked_by = 'w', attempts = 1, "
        "locked_at = now() WHERE id = 6 RETURNING id",
    )
    # Row 8 is held by a live worker process (it beat just now): a slow send, not a lost one.
    query(
        settings,
        "UPDATE email_outbox SET status = 'sending', locked_by = 'live:1:Thread-1', "
        "attempts = 1, locked_at = now() - interval '2 minutes' WHERE id = 8 RETURNING id",
    )
    query(
        settings,
        "INSERT INTO outbox_process (name, kind) VALUES ('live:1', 'worker') RETURNING name",
    )
    broker = make_broker(settings)
    Publisher(broker)(Priority.BULK, [[7]])  # row 7's message still waits in Redis
    with pool(settings) as p:
        swept = Relay(
            settings, p, Recorder(), watch=broker_watch(settings, broker.client, list(Priority))
        ).sweep()
    broker.close()
    assert swept.requeued == 2
    assert swept.uncertain == {"pending": 2, "dead": 1}
    rows = dict(query(settings, "SELECT id, status FROM email_outbox"))
    assert rows == {
        1: "pending",
        2: "pending",
        3: "pending",
        4: "pending",
        5: "dead",
        6: "sending",
        7: "queued",
        8: "sending",
        9: "pending",
    }
    attempts = query(settings, "SELECT outbox_id, verdict FROM email_attempt ORDER BY 1")
    assert attempts == [(3, "uncertain"), (4, "uncertain"), (5, "uncertain")]
    reasons = dict(
        query(
            settings,
            "SELECT outbox_id, reason FROM email_event WHERE to_status <> 'queued' "
            "AND to_status <> 'sending'",
        )
    )
    assert "the broker lost its message" in reasons[1]
    assert "never finished sending" in reasons[3]


def test_two_relays_of_one_priority_each_sweep_nothing_both_queues_hold(
    settings: Settings,
) -> None:
    """A relay asks the broker about its own queue only, so it judges only its rows:
    the high relay must not return the newsletter's rows waiting in the bulk queue."""
    add_newsletter(settings, 50)
    add_login(settings, "login-1")
    add_login(settings, "login-2")
    broker = make_broker(settings)
    with pool(settings) as p:
        relays = [
            Relay(
                settings,
                p,
                Publisher(broker),
                priorities=[priority],
                watch=broker_watch(settings, broker.client, [priority]),
            )
            for priority in Priority
        ]
        for relay in relays:
            relay.run_round()
        # Published over a second ago: every queued row is a sweep candidate now.
        query(
            settings,
            "UPDATE email_outbox SET locked_at = now() - interval '1 minute' RETURNING id",
        )
        swept = [relay.sweep(queued_only=True).requeued for relay in relays]
    broker.close()
    assert swept == [0, 0]
    assert statuses(settings) == {"queued": 52}


@pytest.mark.slow
def test_sweeper_leaves_queued_rows_alone_when_the_broker_cannot_be_asked(
    settings: Settings,
) -> None:
    add_newsletter(settings, 2)
    query(
        settings,
        "UPDATE email_outbox SET status = 'queued', locked_by = 'r', locked_at = now() "
        "- interval '2 hours' RETURNING id",
    )
    away = redis.Redis(port=1, socket_connect_timeout=0.5)  # nothing listens there
    with pool(settings) as p:
        swept = Relay(
            settings, p, Recorder(), watch=broker_watch(settings, away, list(Priority))
        ).sweep()
    assert swept.requeued == 0
    assert statuses(settings) == {"queued": 2}


def test_sweeper_holds_abandoned_sends_when_asked(settings: Settings) -> None:
    settings = dataclasses.replace(settings, stuck_seconds=1, on_uncertain="hold")
    add_newsletter(settings, 1)
    query(
        settings,
        "UPDATE email_outbox SET status = 'sending', locked_by = 'w', attempts = 1, "
        "locked_at = now() - interval '1 minute' RETURNING id",
    )
    with pool(settings) as p:
        assert Relay(settings, p, Recorder()).sweep().uncertain == {"held": 1}


def test_real_broker_receives_the_messages(settings: Settings, redis_client: redis.Redis) -> None:
    add_newsletter(settings, 30)
    add_login(settings)
    broker = make_broker(settings)
    with pool(settings) as p:
        Relay(settings, p, Publisher(broker)).run_round()
    namespace = f"{settings.namespace}-dramatiq"
    assert redis_client.hlen(f"{namespace}:email_high.msgs") == 1
    assert redis_client.hlen(f"{namespace}:email_bulk.msgs") == 2  # 25 + 5 rows
    broker.close()


def test_run_loop_wakes_on_notify_and_stops(settings: Settings) -> None:
    settings = dataclasses.replace(settings, poll_interval=NEVER)  # only NOTIFY can wake it
    recorder = Recorder()
    stop = threading.Event()
    with pool(settings) as p:
        relay = Relay(settings, p, recorder)
        thread = threading.Thread(target=relay.run, args=(stop,))
        thread.start()
        try:
            time.sleep(0.5)  # the relay is now waiting on LISTEN
            started = time.monotonic()
            login = add_login(settings)
            while login not in recorder.ids() and time.monotonic() - started < 60:
                time.sleep(0.01)
        finally:
            stop.set()
            thread.join(timeout=60)
    assert login in recorder.ids()  # published within the hour's poll: the NOTIFY woke it
    assert not thread.is_alive()  # and the stop ended the hour's wait


@pytest.mark.slow
def test_run_loop_wakes_when_a_row_falls_due(settings: Settings) -> None:
    """A row put back for a moment (paced, a short retry) is claimed when due, not a poll later."""
    settings = dataclasses.replace(settings, poll_interval=NEVER)
    add_newsletter(settings, 1)
    query(
        settings,
        "UPDATE email_outbox SET next_attempt_at = now() + interval '1.5 seconds' RETURNING id",
    )
    recorder = Recorder()
    stop = threading.Event()
    with pool(settings) as p:
        thread = threading.Thread(target=Relay(settings, p, recorder).run, args=(stop,))
        started = time.monotonic()
        thread.start()
        try:
            while not recorder.ids() and time.monotonic() - started < 60:
                time.sleep(0.01)
            waited = time.monotonic() - started
        finally:
            stop.set()
            thread.join(timeout=60)
    assert recorder.ids() == [1]  # within the hour's poll: it woke when the row fell due
    assert waited > 1.3  # and not before


def test_a_relay_can_serve_only_some_priorities(settings: Settings) -> None:
    bulk = add_newsletter(settings, 5)
    login = add_login(settings)
    high_only, bulk_only = Recorder(), Recorder()
    with pool(settings) as p:
        Relay(settings, p, high_only, priorities=[Priority.HIGH]).run_round()
        Relay(settings, p, bulk_only, priorities=[Priority.BULK]).run_round()
    assert high_only.ids() == [login]
    assert sorted(bulk_only.ids()) == sorted(bulk)
