"""The relay: due rows from Postgres to the broker, high priority first.

Postgres stays the queue; the broker only ever holds ``max_in_flight`` rows
per priority (backpressure). A claim is committed only after its messages
are published, so a relay that dies mid-batch leaves its rows pending (the
transaction rolls back) and a message published for a row that is no longer
``queued`` is acknowledged by the worker without sending.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry.trace import Link, SpanKind

from outbox.config import Settings
from outbox.db import store
from outbox.errors import OutboxError
from outbox.models import Priority
from outbox.telemetry.tracing import context_from, span_context_from, tracer

log = logging.getLogger(__name__)

NOTIFY_CHANNEL = "outbox_due"
Publish = Callable[[Priority, Sequence[Sequence[int]]], None]
"""Sends each group of row ids as one broker message on the priority's queue."""

# A saturated relay re-checks room this often rather than waiting a full poll.
_SATURATED_WAIT = 0.05


@dataclass
class RoundResult:
    published: int = 0
    saturated: bool = False  # some priority had due rows but no room


class Relay:
    def __init__(
        self,
        settings: Settings,
        pool: store.Pool,
        publish: Publish,
        *,
        name: str | None = None,
        priorities: Sequence[Priority] = (Priority.HIGH, Priority.BULK),
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.publish = publish
        self.name = name or f"relay:{socket.gethostname()}:{os.getpid()}"
        # A relay of its own for login codes is never inside a newsletter's round.
        self.priorities = sorted(priorities, key=[Priority.HIGH, Priority.BULK].index)
        self._last_sweep = 0.0

    def run_round(self) -> RoundResult:
        """Claim and publish one batch per priority, high first."""
        result = RoundResult()
        for priority in self.priorities:
            published, saturated = self._claim_and_publish(priority)
            result.published += published
            result.saturated |= saturated
        return result

    def sweep(self) -> store.Swept:
        with self.pool.connection() as conn:
            swept = store.sweep(
                conn,
                stuck_seconds=self.settings.stuck_seconds,
                max_attempts=self.settings.max_attempts,
                hold=self.settings.on_uncertain == "hold",
            )
        if swept.requeued or swept.uncertain:
            log.warning(
                "sweeper returned %d queued rows and %s abandoned sending rows",
                swept.requeued,
                swept.uncertain,
            )
        return swept

    def run(self, stop: threading.Event) -> None:
        """Loop until ``stop`` is set: publish, sweep now and then, wait for work."""
        listener = store.Listener(self.settings.listen_url, NOTIFY_CHANNEL)
        log.info("relay %s started", self.name)
        failures = 0
        try:
            while not stop.is_set():
                try:
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
                except (OutboxError, OSError) as exc:
                    # Postgres or the broker is away: nothing was committed, so
                    # nothing is lost; wait and try again.
                    failures += 1
                    wait = min(5.0, 0.1 * 2**failures)
                    log.warning("relay round failed (%s); again in %.1fs", exc, wait)
                    stop.wait(wait)
                    continue
                if timeout:
                    listener.wait(timeout, stop)
        finally:
            listener.close()
            log.info("relay %s stopped", self.name)

    def _until_next_due(self) -> float:
        """Seconds to sleep: the poll interval, or less when a row falls due sooner."""
        with self.pool.connection() as conn:
            due = [store.seconds_to_next_due(conn, p.value) for p in self.priorities]
        soonest = min((d for d in due if d is not None), default=self.settings.poll_interval)
        return min(self.settings.poll_interval, max(_SATURATED_WAIT, soonest))

    def _claim_and_publish(self, priority: Priority) -> tuple[int, bool]:
        settings = self.settings
        with self.pool.connection() as conn:
            room = settings.max_in_flight - store.count_in_flight(conn, priority)
            if room <= 0:
                return 0, True
            claimed = store.claim_due(
                conn,
                priority=priority.value,
                limit=min(room, settings.claim_batch),
                relay=self.name,
            )
            for group in _group(claimed, priority, settings.bulk_batch):
                self._publish_traced(priority, group)
            # Leaving the block commits: only now are the rows `queued`.
        saturated = len(claimed) == room
        return len(claimed), saturated

    def _publish_traced(self, priority: Priority, group: list[store.Claimed]) -> None:
        """One broker message inside a PRODUCER span the publisher propagates.

        A login code's span continues its business event's trace; a bulk
        message links to the events of the rows it carries instead, so that a
        newsletter is not one trace of a hundred thousand spans.
        """
        contexts = [span_context_from(c.trace_context) for c in group]
        parent = context_from(group[0].trace_context) if priority is Priority.HIGH else None
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
    claimed: list[store.Claimed], priority: Priority, bulk_batch: int
) -> list[list[store.Claimed]]:
    """A login code travels alone; bulk rows share a message to save overhead."""
    size = 1 if priority is Priority.HIGH else bulk_batch
    return [claimed[i : i + size] for i in range(0, len(claimed), size)]
