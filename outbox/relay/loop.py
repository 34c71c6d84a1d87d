"""The relay: due rows from Postgres to the broker, high priority first.

Postgres stays the queue; the broker only ever holds ``max_in_flight`` rows
per priority (backpressure). A claim is committed only after its messages
are published, so a relay that dies mid-batch leaves its rows pending (the
transaction rolls back) and a message published for a row that is no longer
``queued`` is acknowledged by the worker without sending.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry.trace import Link, SpanKind

from outbox.config import Settings
from outbox.db.store import breaker_rows, connections, counts, listener, processes, relaying
from outbox.delivery.breaker import Gate, gate
from outbox.delivery.shared_breaker import transport_key
from outbox.errors import BrokerError, OutboxError
from outbox.models import Priority
from outbox.relay.broker_watch import BrokerWatch
from outbox.relay.dead_letters import DeadLetters
from outbox.telemetry.log_once import DownOnce
from outbox.telemetry.tracing import context_from, is_tracing, span_context_from, tracer

log = logging.getLogger(__name__)

NOTIFY_CHANNEL = "outbox_due"
Publish = Callable[[Priority, Sequence[Sequence[int]]], None]
"""Sends each group of row ids as one broker message on the priority's queue."""

# A saturated relay re-checks room this often rather than waiting a full poll.
_SATURATED_WAIT = 0.05
# A queued row younger than this is not yet a sweep candidate (its claim commits after publishing).
_LOST_AFTER = 1.0
# How often the relay asks whether the broker restarted.
_EPOCH_CHECK = 1.0


@dataclass
class RoundResult:
    published: int = 0
    saturated: bool = False  # some priority had due rows but no room


class Relay:
    def __init__(
        self,
        settings: Settings,
        pool: connections.Pool,
        publish: Publish,
        *,
        name: str | None = None,
        priorities: Sequence[Priority] = (Priority.HIGH, Priority.BULK),
        watch: BrokerWatch | None = None,
        dead_letters: DeadLetters | None = None,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.publish = publish
        self.name = name or f"relay:{socket.gethostname()}:{os.getpid()}"
        # A relay of its own for login codes is never inside a newsletter's round.
        self.priorities = sorted(priorities, key=[Priority.HIGH, Priority.BULK].index)
        self.watch = watch  # None: the broker cannot be asked, queued rows are never swept
        self.dead_letters = dead_letters  # RabbitMQ's: rows of dead-lettered messages go back
        self.breaker_key = transport_key(settings)
        self._last_sweep = 0.0
        self.last_loop = time.monotonic()  # the top of run()'s latest round: its liveness
        self._last_beat = -1e9
        self._last_epoch_check = -1e9
        self._probe_sent = -1e9
        # Set by run(): since when this relay has reached Postgres without a break.
        self._connected_since: float | None = None
        self.postgres = DownOnce(log, "Postgres")
        self.broker = DownOnce(log, "the broker")

    def run_round(self) -> RoundResult:
        """Claim and publish one batch per priority, high first.

        While the sending path's breaker is open only a probe is published now
        and then: the rows wait in ``pending`` instead of cycling through the
        broker and back.
        """
        result = RoundResult()
        limit = self._breaker_limit()
        for priority in self.priorities:
            if limit == 0:
                break
            published, saturated = self._claim_and_publish(priority, limit)
            result.published += published
            result.saturated |= saturated
            if limit is not None and published:
                self._probe_sent = time.monotonic()
                limit = 0
        return result

    def _breaker_limit(self) -> int | None:
        """Rows this round may claim per priority: None (no limit), 1 (a probe) or 0."""
        with self.pool.connection() as conn:
            state, now = breaker_rows.read_breaker(conn, self.breaker_key)
        if gate(state, now) is Gate.SEND:
            return None
        if gate(state, now) is Gate.WAIT:
            return 0
        # One probe per probe interval from this relay; a worker takes the lease.
        waited = time.monotonic() - self._probe_sent
        return 1 if waited >= self.settings.outage_probe_seconds else 0

    def sweep(self, *, queued_only: bool = False) -> relaying.Swept:
        """Return lost rows: queued ones the broker no longer holds, and sending
        ones of worker processes that stopped beating.

        A running relay sweeps ``sending`` rows only once it has reached
        Postgres for ``OUTBOX_STUCK_SECONDS`` without a break: after an outage
        every heartbeat is old, and the workers need a beat to say they live.
        """
        settings = self.settings
        since = self._connected_since
        sending = not queued_only and (
            since is None or time.monotonic() - since >= settings.stuck_seconds
        )
        lost: set[int] = set()
        if self.watch is not None:
            with self.pool.connection() as conn:
                candidates = relaying.queued_ids(
                    conn, priorities=[p.value for p in self.priorities], lost_after=_LOST_AFTER
                )
            if candidates:
                try:
                    held = self.watch.held_ids()
                except BrokerError as exc:
                    log.debug("queued rows not swept: %s", exc)
                else:
                    lost = set(candidates) - held
        if self.dead_letters is not None:
            self._return_dead_lettered()
        with self.pool.connection() as conn:
            swept = relaying.sweep(
                conn,
                stuck_seconds=settings.stuck_seconds,
                max_attempts=settings.max_attempts,
                hold=settings.on_uncertain == "hold",
                lost=lost,
                sending=sending,
            )
            if sending:
                processes.forget_process(conn, "")  # prunes processes silent for a day
        if swept.requeued or swept.uncertain:
            log.warning(
                "sweeper returned %d queued rows the broker had lost and %s rows of silent"
                " worker processes",
                swept.requeued,
                swept.uncertain,
            )
        return swept

    def _return_dead_lettered(self) -> None:
        assert self.dead_letters is not None

        def give_back(ids: list[int]) -> int:
            with self.pool.connection() as conn:
                return relaying.return_dead_lettered(conn, ids)

        try:
            self.dead_letters.drain(give_back)
        except BrokerError as exc:
            log.debug("dead-lettered messages not read: %s", exc)

    def run(self, stop: threading.Event) -> None:
        """Loop until ``stop`` is set: publish, sweep now and then, wait for work."""
        wakeups = listener.Listener(self.settings.listen_url, NOTIFY_CHANNEL)
        log.info("relay %s started", self.name)
        failures = 0
        self._connected_since = time.monotonic()
        try:
            while not stop.is_set():
                self.last_loop = time.monotonic()
                try:
                    self._beat()
                    self._check_broker()
                    if time.monotonic() - self._last_sweep >= self.settings.sweep_interval:
                        self.sweep()
                        self._last_sweep = time.monotonic()
                    result = self.run_round()
                    if result.saturated:
                        timeout = _SATURATED_WAIT
                    elif result.published:
                        timeout = 0.0  # more may be due right now
                    else:
                        timeout = self._until_next_due()
                    failures = 0
                    if self.postgres.ok():
                        self._connected_since = time.monotonic()
                    if self.broker.is_down:
                        self.broker.ok(waiting=self._waiting())
                except (OutboxError, OSError) as exc:
                    # Postgres or the broker is away: nothing was committed, so
                    # nothing is lost; wait and try again. Said once per outage.
                    failures += 1
                    wait = min(1.0, 0.1 * 2**failures)  # back within a second of recovery
                    if isinstance(exc, BrokerError):
                        self.broker.failed(exc, waiting=self._waiting())
                    else:
                        self.postgres.failed(exc)
                    log.debug("relay round failed (%s); again in %.1fs", exc, wait)
                    stop.wait(wait)
                    continue
                if timeout:
                    wakeups.wait(timeout, stop)
        finally:
            wakeups.close()
            with (
                contextlib.suppress(OutboxError),
                self.pool.connection(timeout=2) as conn,
            ):
                processes.forget_process(conn, self.name)
            log.info("relay %s stopped", self.name)

    def stalled(self) -> str | None:
        """Why this relay's loop is not running, or None (its liveness)."""
        late = time.monotonic() - self.last_loop
        if late > self.settings.stuck_seconds:
            return f"its loop last ran {late:.0f}s ago"
        return None

    def _beat(self) -> None:
        if time.monotonic() - self._last_beat < self.settings.heartbeat_seconds():
            return
        detail = {
            "priorities": [p.value for p in self.priorities],
            "broker": "down" if self.broker.is_down else "up",
        }
        with self.pool.connection() as conn:
            processes.beat(conn, self.name, "relay", detail)
        self._last_beat = time.monotonic()

    def _check_broker(self) -> None:
        """A broker that restarted (or was flushed) lost every queued message:
        return those rows now, not after a threshold; login codes go out first."""
        if self.watch is None or time.monotonic() - self._last_epoch_check < _EPOCH_CHECK:
            return
        self._last_epoch_check = time.monotonic()
        if not self.watch.restarted():
            return
        swept = self.sweep(queued_only=True)
        if swept.requeued:
            log.warning(
                "the broker's data set is new (a restart or a flush): %d queued rows it lost"
                " are pending again",
                swept.requeued,
            )

    def _waiting(self) -> str:
        try:
            with self.pool.connection(timeout=2) as conn:
                unsent = counts.unsent_counts(conn)
        except OutboxError:
            return "unknown"
        return ", ".join(f"{n} {p}" for p, n in sorted(unsent.items())) or "none"

    def _until_next_due(self) -> float:
        """Seconds to sleep: the poll interval, or less when a row falls due sooner."""
        with self.pool.connection() as conn:
            due = [relaying.seconds_to_next_due(conn, p.value) for p in self.priorities]
        soonest = min((d for d in due if d is not None), default=self.settings.poll_interval)
        return min(self.settings.poll_interval, max(_SATURATED_WAIT, soonest))

    def _claim_and_publish(self, priority: Priority, limit: int | None) -> tuple[int, bool]:
        settings = self.settings
        with self.pool.connection() as conn:
            room = settings.max_in_flight - relaying.count_in_flight(conn, priority)
            if room <= 0:
                return 0, True
            claimed = relaying.claim_due(
                conn,
                priority=priority.value,
                limit=min(room, settings.claim_batch, limit or settings.claim_batch),
                relay=self.name,
            )
            for group in _group(claimed, priority, settings.bulk_batch):
                self._publish_traced(priority, group)
            # Leaving the block commits: only now are the rows `queued`.
        saturated = len(claimed) == room and limit is None
        return len(claimed), saturated

    def _publish_traced(self, priority: Priority, group: list[relaying.Claimed]) -> None:
        """One broker message inside a PRODUCER span the publisher propagates.

        A login code's span continues its business event's trace; a bulk
        message links to the events of the rows it carries instead, so that a
        newsletter is not one trace of a hundred thousand spans.
        """
        parent = context_from(group[0].trace_context) if priority is Priority.HIGH else None
        if parent is None and not is_tracing():
            # No span to record, and no trace context to pass on: the ids alone.
            self.publish(priority, [[c.id for c in group]])
            return
        contexts = [span_context_from(c.trace_context) for c in group]
        links = [] if parent else [Link(c) for c in contexts if c is not None]
        queue = f"email_{priority.value}"
        with tracer.start_as_current_span(
            f"send {queue}",
            context=parent,
            kind=SpanKind.PRODUCER,
            links=links,
            attributes={
                "messaging.system": "dramatiq",
                "messaging.operation.type": "send",
                "messaging.destination.name": queue,
                "messaging.batch.message_count": len(group),
                "outbox.ids": [c.id for c in group],
            },
        ):
            self.publish(priority, [[c.id for c in group]])


def _group(
    claimed: list[relaying.Claimed], priority: Priority, bulk_batch: int
) -> list[list[relaying.Claimed]]:
    """A login code travels alone; bulk rows share a message to save overhead."""
    size = 1 if priority is Priority.HIGH else bulk_batch
    return [claimed[i : i + size] for i in range(0, len(claimed), size)]
