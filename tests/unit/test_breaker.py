"""The shared breaker's rules and what counts as a failure of our own sending path."""

from __future__ import annotations

import datetime as dt

import pytest

from outbox.delivery.breaker import (
    BreakerState,
    Gate,
    failed,
    gate,
    needs_write,
    succeeded,
    take_probe,
)
from outbox.delivery.shared_breaker import is_path_failure
from outbox.models import HttpReply, Reply, Stage

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def fail(state: BreakerState, when: float, worker: str = "w1") -> BreakerState:
    return failed(state, at(when), error="refused", threshold=3, probe_seconds=5, worker=worker)


CLOSED = BreakerState("smtp")
OPEN = BreakerState("smtp", "open", 3, opened_at=at(0), retry_at=at(5), last_error="refused")


@pytest.mark.parametrize(
    ("state", "when", "expected"),
    [
        (CLOSED, 0, Gate.SEND),
        (BreakerState("smtp", failures=2), 0, Gate.SEND),
        (OPEN, 1, Gate.WAIT),
        (OPEN, 4.99, Gate.WAIT),
        (OPEN, 5, Gate.PROBE),
        (OPEN, 100, Gate.PROBE),
        (BreakerState("smtp", "open", 3, at(0), at(5), "w2", at(20)), 6, Gate.WAIT),
        (BreakerState("smtp", "open", 3, at(0), at(5), "w2", at(20)), 20, Gate.PROBE),
    ],
)
def test_gate(state: BreakerState, when: float, expected: Gate) -> None:
    assert gate(state, at(when)) is expected


def test_threshold_failures_in_a_row_open_it() -> None:
    state = fail(CLOSED, 0)
    assert (state.state, state.failures) == ("closed", 1)
    state = fail(state, 1)
    assert (state.state, state.failures) == ("closed", 2)
    state = fail(state, 2)
    assert state.is_open
    assert state.opened_at == at(2)
    assert state.retry_at == at(7)
    assert state.last_error == "refused"


def test_a_success_between_failures_starts_the_count_again() -> None:
    state = succeeded(fail(fail(CLOSED, 0), 1))
    assert state == CLOSED
    assert not fail(fail(state, 2), 3).is_open


@pytest.mark.parametrize(
    ("state", "failure", "expected"),
    [
        (CLOSED, False, False),  # the common case: a success writes nothing
        (CLOSED, True, True),
        (BreakerState("smtp", failures=1), False, True),
        (OPEN, False, True),
    ],
)
def test_needs_write(state: BreakerState, failure: bool, expected: bool) -> None:
    assert needs_write(state, failure=failure) is expected


def test_one_probe_at_a_time() -> None:
    assert take_probe(OPEN, at(1), worker="w1", lease_seconds=30) is None  # not due yet
    probing = take_probe(OPEN, at(5), worker="w1", lease_seconds=30)
    assert probing is not None
    assert (probing.probe_by, probing.probe_until) == ("w1", at(35))
    assert take_probe(probing, at(6), worker="w2", lease_seconds=30) is None
    # A probe whose worker died: its lease lapses and another may probe.
    assert take_probe(probing, at(35), worker="w2", lease_seconds=30) is not None


def test_a_failed_probe_keeps_it_open_and_schedules_the_next() -> None:
    probing = take_probe(OPEN, at(5), worker="w1", lease_seconds=30)
    assert probing is not None
    again = fail(probing, 6, worker="w1")
    assert again.is_open
    assert again.opened_at == at(0)  # the outage goes on
    assert (again.retry_at, again.probe_by, again.probe_until) == (at(11), None, None)


def test_a_late_failure_of_another_send_does_not_cancel_the_probe() -> None:
    probing = take_probe(OPEN, at(5), worker="w1", lease_seconds=30)
    assert probing is not None
    late = fail(probing, 6, worker="w2")
    assert (late.probe_by, late.probe_until) == ("w1", at(35))


def test_a_successful_probe_closes_it() -> None:
    probing = take_probe(OPEN, at(5), worker="w1", lease_seconds=30)
    assert probing is not None
    assert succeeded(probing) == CLOSED
    assert gate(succeeded(probing), at(6)) is Gate.SEND


@pytest.mark.parametrize(
    ("reply", "ours"),
    [
        # SMTP: our relay unreachable or refusing our session: not this message's fault.
        (Reply(Stage.CONNECT, error="connection refused"), True),
        (Reply(Stage.CONNECT, error="timeout"), True),
        (Reply(Stage.CONNECT, error="dns: [Errno -2] Name or service not known"), True),
        (Reply(Stage.GREETING, 421, "4.3.2 service shutting down"), True),
        (Reply(Stage.GREETING, 554, "no SMTP service here"), True),
        (Reply(Stage.GREETING, -1, "2"), True),  # cut off a byte into the greeting
        (Reply(Stage.EHLO, 250, "ok"), False),
        (Reply(Stage.EHLO, error="connection reset"), True),
        (Reply(Stage.EHLO, 550, "go away"), True),
        (Reply(Stage.STARTTLS, error="tls: certificate verify failed"), True),
        (Reply(Stage.STARTTLS, error="relay does not offer STARTTLS"), True),
        (Reply(Stage.AUTH, 535, "5.7.8 bad credentials"), True),
        (Reply(Stage.AUTH, 454, "4.7.0 temporary authentication failure"), True),
        # About this message or recipient: an attempt.
        (Reply(Stage.MAIL, 451, "4.3.0 try later"), False),
        (Reply(Stage.RCPT, 550, "5.1.1 no such user"), False),
        (Reply(Stage.RCPT, 421, "4.3.2 try later"), False),
        (Reply(Stage.RCPT, 450, "4.7.1 greylisted"), False),
        (Reply(Stage.DATA, 554, "no"), False),
        (Reply(Stage.BODY, error="connection reset"), False),
        (Reply(Stage.FINAL_REPLY, error="timeout"), False),  # uncertain: it may have left
        (Reply(Stage.FINAL_REPLY, 250, "ok"), False),
        # HTTP providers.
        (HttpReply(Stage.CONNECT, error="connect: refused"), True),
        (HttpReply(Stage.REQUEST, error="WriteTimeout"), True),
        (HttpReply(Stage.RESPONSE, error="ReadTimeout"), False),  # the request left
        (HttpReply(Stage.RESPONSE, 500, "oops"), True),
        (HttpReply(Stage.RESPONSE, 503, "unavailable"), True),
        (HttpReply(Stage.RESPONSE, 429, "slow down"), True),
        (HttpReply(Stage.RESPONSE, 401, "bad token"), True),
        (HttpReply(Stage.RESPONSE, 403, "forbidden"), True),
        (HttpReply(Stage.RESPONSE, 409, "busy", transient=True), True),
        (HttpReply(Stage.RESPONSE, 422, "invalid recipient"), False),
        (HttpReply(Stage.RESPONSE, 200, "ok"), False),
    ],
)
def test_path_failures(reply: Reply, ours: bool) -> None:
    assert is_path_failure(reply) is ours
