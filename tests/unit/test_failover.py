"""The failover breaker and what counts as a transport outage (pure)."""

from __future__ import annotations

import pytest

from outbox.models import HttpReply, Reply, Stage
from outbox.transports.failover import Breaker, Route, is_outage


@pytest.mark.parametrize(
    ("reply", "outage"),
    [
        (Reply(Stage.CONNECT, error="connection refused"), True),
        (Reply(Stage.FINAL_REPLY, error="timeout"), True),
        (Reply(Stage.GREETING, 554, "no service"), True),
        (Reply(Stage.AUTH, 535, "5.7.8 bad credentials"), True),
        (Reply(Stage.MAIL, 451, "4.3.0 local error"), True),
        (Reply(Stage.RCPT, 421, "4.3.2 shutting down"), True),
        (Reply(Stage.RCPT, 550, "5.1.1 no such user"), False),
        (Reply(Stage.RCPT, 450, "4.2.0 greylisted"), False),
        (Reply(Stage.FINAL_REPLY, 552, "5.3.4 too big"), False),
        (Reply(Stage.FINAL_REPLY, 250, "ok"), False),
        (HttpReply(Stage.RESPONSE, 200, "ok"), False),
        (HttpReply(Stage.RESPONSE, 422, "invalid to"), False),
        (HttpReply(Stage.RESPONSE, 401, "bad token", transient=True), True),
        (HttpReply(Stage.RESPONSE, 429, "slow down"), True),
        (HttpReply(Stage.RESPONSE, 503, "unavailable"), True),
        (HttpReply(Stage.CONNECT, error="refused"), True),
    ],
)
def test_outages(reply: Reply, outage: bool) -> None:
    assert is_outage(reply) is outage


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def fail(breaker: Breaker, times: int) -> None:
    for _ in range(times):
        breaker.observe(breaker.route(), outage=True)


def test_opens_after_consecutive_outages_only() -> None:
    breaker = Breaker(threshold=3, cooldown=10, clock=Clock())
    fail(breaker, 2)
    breaker.observe(breaker.route(), outage=False)  # a success resets the count
    fail(breaker, 2)
    assert breaker.route() == Route.PRIMARY
    fail(breaker, 1)
    assert breaker.is_open
    assert breaker.route() == Route.SECONDARY


def test_probes_once_after_the_cooldown_then_fails_back() -> None:
    clock = Clock()
    breaker = Breaker(threshold=1, cooldown=10, clock=clock)
    fail(breaker, 1)
    clock.now += 9.9
    assert breaker.route() == Route.SECONDARY
    clock.now += 0.2
    assert breaker.route() == Route.PROBE
    assert breaker.route() == Route.SECONDARY  # one probe at a time
    breaker.observe(Route.SECONDARY, outage=True)  # the secondary does not move it
    breaker.observe(Route.PROBE, outage=False)
    assert not breaker.is_open
    assert breaker.route() == Route.PRIMARY


def test_a_failed_probe_opens_for_another_cooldown() -> None:
    clock = Clock()
    breaker = Breaker(threshold=5, cooldown=10, clock=clock)
    fail(breaker, 5)
    clock.now += 11
    assert breaker.route() == Route.PROBE
    breaker.observe(Route.PROBE, outage=True)
    assert breaker.route() == Route.SECONDARY
    clock.now += 9
    assert breaker.route() == Route.SECONDARY
    clock.now += 2
    assert breaker.route() == Route.PROBE


@pytest.mark.parametrize(("threshold", "cooldown"), [(0, 10), (1, 0)])
def test_bad_breaker_settings(threshold: int, cooldown: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        Breaker(threshold=threshold, cooldown=cooldown)
