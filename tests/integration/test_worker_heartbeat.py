"""A worker process's heartbeat and its watch over its own pool, against the real Postgres."""

from __future__ import annotations

import dataclasses

from outbox.config import Settings
from outbox.db.store import connections, relaying, sending
from outbox.worker.heartbeat import EXIT_POOL_WEDGED, WEDGED_POOL_WAITS, Heartbeat, process_name
from tests.integration.helpers import add_newsletter, query


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_beat_names_the_process_and_its_pool(settings: Settings) -> None:
    with connections.Pool(settings.database_url, name="test", min_size=1, max_size=3) as pool:
        beat = Heartbeat(settings, pool, exit_process=lambda code: None)
        assert beat.beat() is True
        beat.stop()  # a clean stop leaves the list
    rows = query(settings, "SELECT name FROM outbox_process")
    assert rows == []
    with connections.Pool(settings.database_url, name="test", min_size=1, max_size=3) as pool:
        again = Heartbeat(settings, pool, exit_process=lambda code: None)
        again.beat()
        again.close()
    ((name, kind, detail),) = query(settings, "SELECT name, kind, detail FROM outbox_process")
    assert (name, kind) == (process_name(), "worker")
    assert detail["pool"]["pool_size"] >= 1


def test_a_pool_with_every_connection_leaked_ends_the_process(settings: Settings) -> None:
    settings = dataclasses.replace(settings, pool_timeout=0.1)
    exits: list[int] = []
    clock = Clock()
    with connections.Pool(settings.database_url, name="test", min_size=1, max_size=2) as pool:
        leaked = [
            pool._pool.getconn(),
            pool._pool.getconn(),
        ]  # handed out below, never given back
        beat = Heartbeat(settings, pool, exit_process=exits.append, clock=clock)
        assert beat.beat() is True  # Postgres answers the beat; the pool lends nothing
        assert exits == []
        clock.now += WEDGED_POOL_WAITS * settings.pool_timeout / 2
        beat.beat()
        assert exits == []  # not for long enough yet
        clock.now += WEDGED_POOL_WAITS * settings.pool_timeout
        beat.beat()
        assert exits == [EXIT_POOL_WEDGED]
        beat.close()
        for conn in leaked:
            pool._pool.putconn(conn)


def test_a_pool_that_lends_again_is_not_ended(settings: Settings) -> None:
    settings = dataclasses.replace(settings, pool_timeout=0.1)
    exits: list[int] = []
    clock = Clock()
    with connections.Pool(settings.database_url, name="test", min_size=1, max_size=2) as pool:
        leaked = [pool._pool.getconn(), pool._pool.getconn()]  # a leak, from below
        beat = Heartbeat(settings, pool, exit_process=exits.append, clock=clock)
        beat.beat()
        for conn in leaked:
            pool._pool.putconn(conn)
        clock.now += 10 * WEDGED_POOL_WAITS * settings.pool_timeout
        beat.beat()
        assert beat.wedged_since is None
        beat.close()
    assert exits == []


def test_postgres_away_is_not_blamed_on_the_pool(settings: Settings) -> None:
    away = dataclasses.replace(
        settings, database_url="postgresql://postgres@127.0.0.1:1/none", pool_timeout=0.1
    )
    exits: list[int] = []
    clock = Clock()
    with connections.Pool(away.database_url, name="test", min_size=0, max_size=1) as pool:
        beat = Heartbeat(away, pool, exit_process=exits.append, clock=clock)
        for _ in range(3):
            assert beat.beat() is False
            clock.now += 10 * WEDGED_POOL_WAITS
    assert exits == []


def test_a_beat_returns_rows_locked_by_this_process_that_no_thread_holds(
    settings: Settings,
) -> None:
    ids = add_newsletter(settings, 4)
    mine, in_hand, fresh, theirs = ids
    me = process_name()
    with connections.Pool(settings.database_url, name="test", min_size=1, max_size=3) as pool:
        with pool.connection() as conn:
            claimed = [c.id for c in relaying.claim_due(conn, priority="bulk", limit=4, relay="r")]
            assert sorted(claimed) == sorted(ids)
            sending.take_for_sending(conn, [mine, in_hand], f"{me}:Thread-1")
            sending.take_for_sending(conn, [fresh], f"{me}:Thread-2")
            sending.take_for_sending(conn, [theirs], "elsewhere:1:Thread-1")
        # Locked long ago, except `fresh`, just taken (its thread may not have said so yet).
        query(
            settings,
            "UPDATE email_outbox SET locked_at = now() - interval '1 hour'"
            " WHERE id = ANY(%s) RETURNING id",
            [mine, in_hand, theirs],
        )
        beat = Heartbeat(settings, pool, in_hand=lambda: {in_hand}, exit_process=lambda c: None)
        assert beat.beat() is True
        beat.close()
    rows = dict(query(settings, "SELECT id, status FROM email_outbox"))
    # Another process's row is the sweeper's, after that process falls silent.
    assert rows == {mine: "pending", in_hand: "sending", fresh: "sending", theirs: "sending"}
    attempts = query(settings, "SELECT outbox_id, verdict, worker FROM email_attempt")
    assert attempts == [(mine, "uncertain", "heartbeat")]
