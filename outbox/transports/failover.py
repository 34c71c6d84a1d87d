"""A secondary transport for when the primary is down.

A circuit breaker per worker process: after ``threshold`` consecutive
outage replies from the primary (it cannot be reached, times out, refuses
the session, answers 5xx or 429), sends go to the secondary for ``cooldown``
seconds; then one send probes the primary, and a success brings everything
back. A recipient's own refusal (5yz at RCPT, a 4yz for one mailbox,
greylisting) says nothing about the transport and never trips it.

Each attempt records which transport carried it (``email_attempt.transport``).
Both transports get the same Message-ID; a provider's idempotency key only
de-duplicates at that provider, so an attempt whose outcome was uncertain at
the primary and is retried through the secondary may deliver twice (with the
same Message-ID, which mail clients collapse).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from enum import StrEnum

from outbox.models import HttpReply, Reply, Stage
from outbox.transports.base import OutgoingMessage, Transport

log = logging.getLogger(__name__)


def is_outage(reply: Reply) -> bool:
    """The reply says the transport itself is failing, whatever the recipient."""
    if reply.code is None:
        return True  # unreachable, timed out, broken off
    if isinstance(reply, HttpReply):
        return reply.code >= 500 or reply.code == 429 or reply.transient
    if reply.code == 421:
        return True  # the server is closing the session: RFC 5321 4.2.3
    # Refused before any recipient was named: the session or our account, not a mailbox.
    return reply.code >= 400 and (reply.stage.is_session or reply.stage == Stage.MAIL)


class Route(StrEnum):
    PRIMARY = "primary"
    SECONDARY = "secondary"
    PROBE = "probe"  # the primary, once, while the breaker is open


class Breaker:
    """Where the next send goes (pure but for the injected clock; thread-safe)."""

    def __init__(
        self, *, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if threshold < 1 or cooldown <= 0:
            raise ValueError("a breaker needs threshold >= 1 and cooldown > 0")
        self.threshold = threshold
        self.cooldown = cooldown
        self.clock = clock
        self._failures = 0
        self._open_until: float | None = None
        self._probing = False
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        return self._open_until is not None

    def route(self) -> Route:
        with self._lock:
            if self._open_until is None:
                return Route.PRIMARY
            if self._probing or self.clock() < self._open_until:
                return Route.SECONDARY
            self._probing = True
            return Route.PROBE

    def observe(self, route: Route, *, outage: bool) -> None:
        """What the primary answered; the secondary's answers do not move the breaker."""
        if route == Route.SECONDARY:
            return
        with self._lock:
            if route == Route.PROBE:
                self._probing = False
            if not outage:
                if self._open_until is not None:
                    log.warning("primary transport answers again: failing back")
                self._failures, self._open_until = 0, None
                return
            self._failures += 1
            if route == Route.PROBE or self._failures >= self.threshold:
                if self._open_until is None:
                    log.warning(
                        "primary transport failed %d times in a row: failing over for %gs",
                        self._failures,
                        self.cooldown,
                    )
                self._open_until = self.clock() + self.cooldown


class Failover:
    def __init__(
        self,
        primary: Transport,
        secondary: Transport,
        *,
        names: tuple[str, str],
        breaker: Breaker,
    ) -> None:
        self.primary = primary
        self.secondary = secondary
        self.names = names
        self.breaker = breaker

    def send(self, message: OutgoingMessage) -> Reply:
        route = self.breaker.route()
        if route == Route.SECONDARY:
            reply, name = self.secondary.send(message), self.names[1]
        else:
            reply, name = self.primary.send(message), self.names[0]
        self.breaker.observe(route, outage=is_outage(reply))
        return dataclasses.replace(reply, via=name)

    def close(self) -> None:
        self.primary.close()
        self.secondary.close()
