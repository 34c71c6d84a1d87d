"""The sending path's breaker shared through Postgres: two processes' copies, one probe."""

from __future__ import annotations

import dataclasses
import time

import pytest

from outbox.config import Settings
from outbox.delivery.breaker import Gate
from outbox.delivery.shared_breaker import SharedBreaker
from outbox.models import Priority
from outbox.relay.loop import Relay
from tests.integration.helpers import add_newsletter, pool, query


def test_threshold_failures_open_it_for_every_process(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings = dataclasses.replace(settings, outage_threshold=3, outage_probe_seconds=0.3)
    with pool(settings) as p:
        one = SharedBreaker(settings, p.connection, refresh=0)
        other = SharedBreaker(settings, p.connection, refresh=0)
        for worker in ("a:1:t", "b:2:t"):
            one.observe(worker, failure=True, error="connection refused at connect")
        assert other.gate() is Gate.SEND
        other.observe("b:2:t", failure=True, error="connection refused at connect")
        assert one.gate() is Gate.WAIT  # the other process's failure opened it for this one
        time.sleep(0.35)
        assert one.gate() is Gate.PROBE
        assert other.gate() is Gate.PROBE
        assert one.try_probe("a:1:t") is True
        assert other.try_probe("b:2:t") is False  # one probe at a time
        assert other.gate() is Gate.WAIT
        one.observe("a:1:t", failure=False)
        assert other.gate() is Gate.SEND
    said = [r.getMessage() for r in caplog.records if r.name == "outbox.delivery.shared_breaker"]
    assert len([m for m in said if "is down" in m]) == 1
    assert len([m for m in said if "is back" in m]) == 1
    assert "connection refused at connect" in said[0]
    assert "rows waiting" in said[0]


def test_the_relay_publishes_only_probes_while_it_is_open(settings: Settings) -> None:
    settings = dataclasses.replace(settings, outage_probe_seconds=0.3)
    add_newsletter(settings, 30)
    published: list[list[int]] = []

    def publish(priority: Priority, groups: object) -> None:
        published.extend(list(g) for g in groups)  # type: ignore[attr-defined]

    query(
        settings,
        "INSERT INTO outbox_breaker (transport, state, failures, opened_at, retry_at)"
        " VALUES ('smtp', 'open', 3, now(), now() + interval '0.2 seconds') RETURNING transport",
    )
    with pool(settings) as p:
        relay = Relay(settings, p, publish)
        assert relay.run_round().published == 0  # not yet time for a probe
        time.sleep(0.25)
        assert relay.run_round().published == 1  # one probe
        assert relay.run_round().published == 0  # and no second one before the interval
        query(settings, "UPDATE outbox_breaker SET state = 'closed' RETURNING transport")
        assert relay.run_round().published == 29  # closed: full rate again
    assert sum(len(g) for g in published) == 30
