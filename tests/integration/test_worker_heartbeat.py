"""A worker process's heartbeat and its watch over its own pool, against the real Postgres."""

from __future__ import annotations

import dataclasses

from outbox.config import Settings
from outbox.db.store import connections
from outbox.worker.heartbeat import EXIT_POOL_WEDGED, WEDGED_POOL_WAITS, Heartbeat, process_name
from tests.integration.helpers import query


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
