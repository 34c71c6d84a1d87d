"""Shared set-up for the integration tests: rows, pools, waiting."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

import psycopg

from outbox import enqueue, enqueue_many
from outbox.config import Settings
from outbox.db.store import connections
from outbox.delivery.deliver import Delivery
from outbox.models import Priority
from outbox.pacing.pacer import pacer_for
from outbox.relay.loop import Relay
from outbox.testing.sink import Behaviour, SmtpSink
from outbox.transports.smtp import SmtpConfig, SmtpTransport

NEWS = {"name": "R", "title": "News", "intro": "Hi", "url": "https://x.example"}
LOGIN = {"name": "Alice", "code": "123456", "product": "Shop", "minutes": 10}


def add_newsletter(
    settings: Settings, n: int, *, prefix: str = "nl", domain: str = "example.com"
) -> list[int]:
    with psycopg.connect(settings.database_url) as conn:
        results = enqueue_many(
            conn,
            (
                {
                    "idempotency_key": f"{prefix}-{i}",
                    "to": f"r{i}@{domain}",
                    "template": "newsletter",
                    "params": NEWS,
                }
                for i in range(n)
            ),
            settings=settings,
        )
        conn.commit()
    return [r.id for r in results]


@contextmanager
def pool(settings: Settings) -> Iterator[connections.Pool]:
    prepare = settings.prepared_statements == "on"
    with connections.Pool(
        settings.database_url, name="outbox-test", max_size=4, prepare=prepare
    ) as p:
        yield p


def query(settings: Settings, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(settings.database_url) as conn:
        return conn.execute(sql.encode(), args or None).fetchall()


def statuses(settings: Settings) -> dict[str, int]:
    return dict(query(settings, "SELECT status, count(*) FROM email_outbox GROUP BY 1"))


def wait_until(check: Callable[[], bool], timeout: float = 30.0, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


class Harness:
    """A relay and a delivery in this process: publish, then deliver what was published."""

    def __init__(self, settings: Settings, sink_url: str, p: Any) -> None:
        self.groups: list[list[int]] = []
        self.relay = Relay(settings, p, self._publish)
        transport = SmtpTransport(
            SmtpConfig.from_url(sink_url, command_timeout=2, connect_timeout=2)
        )
        pacer = pacer_for(settings)  # None unless the settings name a rate
        self.delivery = Delivery(settings, p, transport, rand=lambda: 1.0, pacer=pacer)
        self.settings = settings

    def _publish(self, priority: Priority, groups: Sequence[Sequence[int]]) -> None:
        self.groups += [list(g) for g in groups]

    def run(self, timeout: float = 20.0) -> None:
        """Until no row is pending, queued or sending."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.relay.run_round()
            while self.groups:
                self.delivery.deliver(self.groups.pop(0))
            if not set(statuses(self.settings)) & {"pending", "queued", "sending"}:
                return
            time.sleep(0.05)
        raise AssertionError(f"rows still unfinished: {statuses(self.settings)}")


@contextmanager
def harness(
    settings: Settings,
    behaviour: Callable[[str], Behaviour] | None = None,
    *,
    smtputf8: bool = True,
    started: bool = True,
    smtp_url: str | None = None,
) -> Iterator[tuple[Harness, SmtpSink]]:
    """A relay and a delivery in this process, sending to a fresh sink (or to ``smtp_url``)."""
    sink = SmtpSink(behaviour, smtputf8=smtputf8)
    if started:
        sink.start()
    try:
        with pool(settings) as p:
            h = Harness(settings, smtp_url or sink.url, p)
            try:
                yield h, sink
            finally:
                # What the committer holds reaches Postgres before the database goes.
                h.delivery.close()
                h.delivery.transport.close()
    finally:
        if started:
            sink.stop()


def add_login(settings: Settings, key: str, to: str) -> int:
    """One login code, committed; its row id."""
    with psycopg.connect(settings.database_url) as conn:
        result = enqueue(
            conn,
            idempotency_key=key,
            to=to,
            template="login_code",
            params=LOGIN,
            priority="high",
            settings=settings,
        )
        conn.commit()
    return result.id


def median_gap(times: list[float]) -> float:
    """The median time between consecutive arrivals.

    The pace a receiver saw, robust to a loaded machine: a stalled sender
    sends its overdue slots together, which shortens a few gaps and lengthens
    one, but leaves the median where the pacing put it (the most arrivals in
    any one second, the receiver's own figure, is in bench/bench_pacing.py).
    """
    ordered = sorted(times)
    return statistics.median(b - a for a, b in pairwise(ordered))
