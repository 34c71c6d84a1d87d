"""The sending path's circuit breaker, shared by every worker process (pure).

A failure of our own path (the relay unreachable, our session or account
refused, a provider's 5xx) says nothing about the message, so it is not an
attempt; but a path that keeps failing would have every worker burn through
the rows it claims. After ``threshold`` such failures in a row the breaker
opens: sends stop, rows stay ``pending``, and every ``probe_seconds`` one send
(one, across all processes: a lease) tests the path. Its success closes the
breaker and sending resumes at full rate; its failure keeps it open.

The state is one row in Postgres (:mod:`outbox.db.store`), changed under a row
lock by the functions here, so that exactly one process sees each opening and
each closing (and says so, once).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from enum import StrEnum


class Gate(StrEnum):
    SEND = "send"  # closed: send
    PROBE = "probe"  # open and a probe is due: try to take the lease, then send
    WAIT = "wait"  # open: hand the row back without an attempt


@dataclass(frozen=True, slots=True)
class BreakerState:
    transport: str
    state: str = "closed"  # closed | open
    failures: int = 0  # consecutive failures of the path
    opened_at: dt.datetime | None = None
    retry_at: dt.datetime | None = None  # an open breaker lets one probe through from then
    probe_by: str | None = None  # the worker holding the probe lease
    probe_until: dt.datetime | None = None
    last_error: str | None = None

    @property
    def is_open(self) -> bool:
        return self.state == "open"


def gate(state: BreakerState, now: dt.datetime) -> Gate:
    """What a send may do now, from a (possibly slightly old) copy of the state."""
    if not state.is_open:
        return Gate.SEND
    if state.retry_at is not None and now < state.retry_at:
        return Gate.WAIT
    if state.probe_until is not None and now < state.probe_until:
        return Gate.WAIT  # someone else's probe is under way
    return Gate.PROBE


def take_probe(
    state: BreakerState, now: dt.datetime, *, worker: str, lease_seconds: float
) -> BreakerState | None:
    """The state with ``worker`` holding the probe lease, or None when it may not probe."""
    if gate(state, now) is not Gate.PROBE:
        return None
    until = now + dt.timedelta(seconds=lease_seconds)
    return dataclasses.replace(state, probe_by=worker, probe_until=until)


def failed(
    state: BreakerState,
    now: dt.datetime,
    *,
    error: str,
    threshold: int,
    probe_seconds: float,
    worker: str,
) -> BreakerState:
    """After a failure of the path. A failed probe, or the threshold reached, (re)opens it."""
    failures = state.failures + 1
    probe = state.probe_by == worker
    opens = state.is_open or failures >= threshold
    if not opens:
        return dataclasses.replace(state, failures=failures, last_error=error)
    retry_at = now + dt.timedelta(seconds=probe_seconds)
    if state.is_open and not probe and state.retry_at is not None:
        retry_at = max(retry_at, state.retry_at)  # a send that was already under way
    return dataclasses.replace(
        state,
        state="open",
        failures=failures,
        opened_at=state.opened_at if state.is_open else now,
        retry_at=retry_at,
        probe_by=None if probe else state.probe_by,
        probe_until=None if probe else state.probe_until,
        last_error=error,
    )


def succeeded(state: BreakerState) -> BreakerState:
    """After a send the path carried (whatever the receiver answered): closed, no failures."""
    return BreakerState(state.transport)


def needs_write(state: BreakerState, *, failure: bool) -> bool:
    """Whether an outcome changes the shared state: a success only when something is recorded."""
    return failure or state.failures > 0 or state.is_open
