"""``outbox webhooks deliver``: the feed's events posted to every endpoint.

Each round hands the feed's new events to the endpoints (deliveries, in feed
order), starts the deliveries due (up to OUTBOX_WEBHOOK_CONCURRENCY at once
per endpoint, never two of one email at once nor one before an earlier one
of its email is delivered; as many again are read ahead), and records what
the finished ones got, in one transaction: delivered deliveries go, failed
ones wait for their next try (:mod:`outbox.events.retry_schedule`), an
endpoint past the schedule is paused, one answering 410 is disabled. Every
try of an event carries the same ``webhook-id``; a crash between a receiver's
answer and its record sends it again (at least once), which the receiver
de-duplicates by that id.

One deliverer runs at a time (a Postgres session lock); another started
beside it waits as a standby and takes over when the first one's session ends.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import orjson

from outbox.config import Settings
from outbox.db.store import connections, webhook_rows
from outbox.db.store.webhook_rows import Due, LiveEndpoint
from outbox.errors import ConfigError, StoreError
from outbox.events import hook_signing
from outbox.events.event_body import event_id, feed_event
from outbox.events.hook_sender import Sender
from outbox.events.hook_target import Target, resolve
from outbox.events.retry_schedule import DELAYS, Answer, next_delay, verdict

log = logging.getLogger(__name__)

FAN_OUT_BATCH = 2000  # events handed to each endpoint per round
IDLE_SECONDS = 0.5  # the wait for new events when nothing is in flight
FAN_OUT_SECONDS = 0.05  # new events are looked for this often while deliveries run
ENDPOINT_SECONDS = 1.0  # a change of endpoints (created, disabled) is seen this soon
RESOLVE_SECONDS = 60.0  # an endpoint's host is resolved again this often
STANDBY_SECONDS = 5.0


@dataclass(slots=True)
class Flight:
    endpoint: LiveEndpoint
    due: Due
    future: Future[Answer]


@dataclass(slots=True)
class Outcomes:
    """What a round's finished deliveries come to, recorded together."""

    delivered: list[int] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    retries: list[tuple[int, float, str]] = field(default_factory=list)
    states: dict[int, tuple[str, str]] = field(default_factory=dict)  # endpoint: state, why


class Deliverer:
    def __init__(
        self,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.settings = settings
        self.concurrency = settings.webhook_concurrency
        self.allow_private = settings.webhook_allow_private == "1"
        self.clock = clock
        self.now = now
        self.sender = Sender(timeout=settings.webhook_timeout, connections=self.concurrency)
        self.threads = ThreadPoolExecutor(self.concurrency, thread_name_prefix="webhook")
        self.in_flight: dict[int, Flight] = {}  # by delivery id
        self._next_fan_out = 0.0
        self._endpoints: list[LiveEndpoint] = []
        self._endpoints_read = -ENDPOINT_SECONDS
        self._ready: dict[int, deque[Due]] = {}  # read ahead, by endpoint
        self._answered: queue.SimpleQueue[Flight] = queue.SimpleQueue()
        self._dry: dict[int, float] = {}  # endpoint: when to look for due deliveries again
        self._targets: dict[int, tuple[float, str, Target | str]] = {}
        self._secrets: dict[str, str] = {}  # sealed: opened
        self.last_loop = clock()  # a standby's wait counts: it is alive, and ready to take over

    def run(self, stop: threading.Event) -> None:
        """Deliver until ``stop`` is set; a lost database is reached again."""
        conn: connections.Conn | None = None
        try:
            while not stop.is_set():
                self.last_loop = self.clock()
                try:
                    if conn is None or conn.closed:
                        conn = self._locked_connection(stop)
                        if conn is None:
                            return
                    if not self.round(conn):
                        self._idle(stop)
                except StoreError as exc:
                    log.warning("webhook delivery paused: %s", exc)
                    if conn is not None:
                        conn.close()
                    conn = None
                    stop.wait(1.0)
        finally:
            self.close()
            if conn is not None:
                conn.close()

    def stalled(self) -> str | None:
        """Why this deliverer's loop is not running, or None (its liveness)."""
        late = self.clock() - self.last_loop
        limit = max(self.settings.stuck_seconds, STANDBY_SECONDS * 2)
        return f"its loop last ran {late:.0f}s ago" if late > limit else None

    def _locked_connection(self, stop: threading.Event) -> connections.Conn | None:
        told = False
        while not stop.is_set():
            conn = connections.connect(self.settings.database_url, autocommit=True)
            if webhook_rows.deliverer_lock(conn):
                log.info("delivering webhooks")
                conn.autocommit = False
                return conn
            conn.close()
            self.last_loop = self.clock()
            if not told:
                log.info("another `outbox webhooks deliver` runs; standing by")
                told = True
            stop.wait(STANDBY_SECONDS)
        return None

    def round(self, conn: connections.Conn) -> bool:
        """One pass; whether anything was started or finished."""
        now = self.clock()
        if now >= self._next_fan_out:
            moved = webhook_rows.fan_out(conn, FAN_OUT_BATCH)
            connections.commit(conn)
            # More may wait behind a full batch; else new events are looked for soon.
            self._next_fan_out = now if moved else now + FAN_OUT_SECONDS
        if now >= self._endpoints_read + ENDPOINT_SECONDS:
            self._endpoints = webhook_rows.live_endpoints(conn)
            self._endpoints_read = now
            for gone in set(self._ready) - {e.id for e in self._endpoints}:
                self._forget(gone)  # paused or disabled meanwhile
        finished = self._finished(timeout=IDLE_SECONDS if self.in_flight else 0.0)
        # Slots freed by answers are filled first; the answers are recorded after.
        unrecorded = [f.due.id for f in finished]
        started = 0
        for endpoint in self._endpoints:
            started += self._start(conn, endpoint, unrecorded)
        connections.commit(conn)
        if finished:
            self._record(conn, finished)
        return bool(started or finished)

    def _idle(self, stop: threading.Event) -> None:
        if not self.in_flight:
            stop.wait(IDLE_SECONDS)

    def _start(self, conn: connections.Conn, endpoint: LiveEndpoint, unrecorded: list[int]) -> int:
        """Start what fits of the endpoint's ready deliveries, read ahead: a slot
        freed by an answer is filled without waiting for a query. ``unrecorded``:
        deliveries answered whose outcome is not written yet (still open rows)."""
        flying = [i for i, f in self.in_flight.items() if f.endpoint.id == endpoint.id]
        ready = self._ready.setdefault(endpoint.id, deque())
        if len(ready) < self.concurrency and self.clock() >= self._dry.get(endpoint.id, 0.0):
            want = 2 * self.concurrency - len(flying) - len(ready)
            busy = [*flying, *(d.id for d in ready), *unrecorded]
            found = webhook_rows.due_deliveries(conn, endpoint.id, busy=busy, limit=want)
            ready.extend(found)
            if len(found) < want:  # none left due: look again once new events may be in
                self._dry[endpoint.id] = self._next_fan_out
        count = min(self.concurrency - len(flying), len(ready))
        if count <= 0:
            return 0
        target = self._target(endpoint)
        try:
            secrets_ = self._signing_secrets(endpoint)
        except ConfigError as exc:  # OUTBOX_SECRET changed without OUTBOX_PREVIOUS_SECRETS
            webhook_rows.set_state(conn, endpoint.id, "paused", str(exc))
            log.error("webhook endpoint %d paused: %s", endpoint.id, exc)
            self._forget(endpoint.id)
            return 0
        for _ in range(count):
            delivery = ready.popleft()
            future = self.threads.submit(self._post, endpoint, delivery, target, secrets_)
            flight = Flight(endpoint, delivery, future)
            self.in_flight[delivery.id] = flight
            future.add_done_callback(functools.partial(self._land, flight))
        return count

    def _land(self, flight: Flight, _: Future[Answer]) -> None:
        self._answered.put(flight)

    def _forget(self, endpoint_id: int) -> None:
        """After a change of an endpoint's state: nothing read ahead for it is started."""
        self._ready.pop(endpoint_id, None)
        self._dry.pop(endpoint_id, None)
        self._endpoints_read = -ENDPOINT_SECONDS  # the endpoints are read again next round

    def _post(
        self, endpoint: LiveEndpoint, delivery: Due, target: Target | str, secrets_: tuple[str, ...]
    ) -> Answer:
        if isinstance(target, str):
            return Answer(None, target)  # the host is refused or does not resolve
        event = feed_event(
            delivery.event, secret=self.settings.secret, addresses=endpoint.addresses
        )
        message_id = event.pop("id")
        event.pop("cursor")
        body = orjson.dumps(event)
        headers = hook_signing.headers(message_id, body, secrets_, now=self.now())
        return self.sender.post(target, body, headers)

    def _target(self, endpoint: LiveEndpoint) -> Target | str:
        """The endpoint's checked address (resolved again now and then), or why none."""
        known = self._targets.get(endpoint.id)
        if known and known[1] == endpoint.url and self.clock() - known[0] < RESOLVE_SECONDS:
            return known[2]
        try:
            found: Target | str = resolve(endpoint.url, allow_private=self.allow_private)
        except ValueError as exc:
            found = str(exc)
        self._targets[endpoint.id] = (self.clock(), endpoint.url, found)
        return found

    def _signing_secrets(self, endpoint: LiveEndpoint) -> tuple[str, ...]:
        keys = (self.settings.secret, *self.settings.previous_secret_list)
        sealed = [s for s in (endpoint.secret_sealed, endpoint.previous_sealed) if s]
        for one in sealed:
            if one not in self._secrets:
                self._secrets[one] = hook_signing.unseal(one, keys=keys)
        return tuple(self._secrets[s] for s in sealed)

    def _finished(self, timeout: float) -> list[Flight]:
        """The flights answered: waits up to ``timeout`` for the first one."""
        if not self.in_flight:
            return []
        done: list[Flight] = []
        with contextlib.suppress(queue.Empty):
            done.append(self._answered.get(timeout=timeout))
            while True:
                done.append(self._answered.get_nowait())
        for flight in done:
            del self.in_flight[flight.due.id]
        return done

    def _record(self, conn: connections.Conn, finished: list[Flight]) -> None:
        outcomes = Outcomes()
        for flight in finished:
            _judge(flight, _answer(flight), outcomes)
        webhook_rows.finish_deliveries(conn, delivered=outcomes.delivered, refused=outcomes.refused)
        if outcomes.retries:
            webhook_rows.retry_deliveries(conn, outcomes.retries)
        for endpoint_id, (state, why) in outcomes.states.items():
            webhook_rows.set_state(conn, endpoint_id, state, why)
            log.warning("webhook endpoint %d %s: %s", endpoint_id, state, why)
            self._forget(endpoint_id)
        connections.commit(conn)

    def close(self) -> None:
        self.threads.shutdown(wait=True, cancel_futures=True)
        self.sender.close()


def _answer(flight: Flight) -> Answer:
    try:
        return flight.future.result()
    except Exception as exc:  # a fault of ours in building the request: tried again
        log.exception("webhook delivery %d failed before its request", flight.due.id)
        return Answer(None, f"not sent: {type(exc).__name__}")


def _judge(flight: Flight, answer: Answer, outcomes: Outcomes) -> None:
    """Fold one attempt's answer into the round's outcomes."""
    delivery, endpoint = flight.due, flight.endpoint
    said = verdict(answer)
    if said == "delivered":
        outcomes.delivered.append(delivery.id)
    elif said == "refused":
        outcomes.refused.append(delivery.id)
        log.warning(
            "webhook endpoint %d refused %s for good: %s",
            endpoint.id,
            event_id(int(delivery.event[0])),
            answer.error,
        )
    elif said == "gone":
        outcomes.refused.append(delivery.id)
        outcomes.states[endpoint.id] = ("disabled", "it answered 410 Gone")
    else:
        failures = delivery.attempts + 1
        delay = next_delay(failures)
        if delay is None:
            delay = DELAYS[-1]
            outcomes.states.setdefault(
                endpoint.id,
                (
                    "paused",
                    f"{event_id(int(delivery.event[0]))} failed {failures} times,"
                    f" last: {answer.error}",
                ),
            )
        outcomes.retries.append((delivery.id, delay, answer.error))
