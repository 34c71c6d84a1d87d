"""Delivering claimed rows: load, render, send, classify, record.

Orchestration only: what a reply means is :mod:`outbox.delivery.classify` and
:mod:`outbox.delivery.retry`; SQL is :mod:`outbox.db.store`; the wire is a transport.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Sequence
from email.utils import parseaddr
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, StatusCode
from opentelemetry.trace import Status as TraceStatus

from outbox.config import Settings
from outbox.db.store import connections, results, sending, texts
from outbox.delivery.breaker import Gate
from outbox.delivery.classify import classify_reply, refuses_address
from outbox.delivery.result_committer import Committed, ResultCommitter
from outbox.delivery.retry import RetryPolicy, decide
from outbox.delivery.shared_breaker import SharedBreaker, describe_failure, is_path_failure
from outbox.errors import AttachmentUnavailable, OutboxError, StoreError
from outbox.fields import labels
from outbox.message.compose import composer
from outbox.message.render import template_set
from outbox.message.return_path import return_path
from outbox.models import Outcome, Priority, Reply, Stage, Status, Verdict
from outbox.pacing.pacer import Pacer
from outbox.pacing.rules import GLOBAL, throttled_scope
from outbox.redact import Redactor, recipient_tag
from outbox.telemetry.log_once import DownOnce, Summary
from outbox.telemetry.tracing import (
    QUIET,
    context_from,
    email_attributes,
    failures_by_type,
    is_tracing,
    label_attributes,
    span_context_from,
    tracer,
)
from outbox.transports.base import OutgoingMessage, Transport, TransportBusy
from outbox.validate import ascii_address

log = logging.getLogger(__name__)

# A row whose attachment this worker cannot see comes back this much later.
_UNAVAILABLE_WAIT = 60.0


# A send is routine; a retry worth a line; a refusal a warning; giving up an error.
_LOG_LEVELS = {
    Status.SENT: logging.DEBUG,
    Status.PENDING: logging.INFO,
    Status.FAILED: logging.WARNING,
    Status.DEAD: logging.ERROR,
    Status.HELD: logging.ERROR,
}


def _describe_attempt(
    span: Span, row: sending.OutboxRow, record: results.AttemptRecord, redactor: Redactor
) -> None:
    span.set_attributes(
        email_attributes(
            outbox_id=row.id,
            idempotency_key=row.idempotency_key,
            message_id=row.message_id,
            template=row.template,
            priority=row.priority,
            recipient=row.recipient,
            tag_secret=redactor.tag_secret,
        )
    )
    span.set_attributes(label_attributes(row.tags, row.metadata, tag_secret=redactor.tag_secret))
    span.set_attribute("outbox.attempt", record.attempt)
    # Reply texts name addresses ("550 5.1.1 <bob@example.org>"): tagged in the span.
    reason = redactor.text(record.reason)
    span.set_attribute("outbox.verdict", record.verdict)
    span.set_attribute("outbox.status", record.status)
    for name, value in (
        ("smtp.stage", record.stage),
        ("smtp.reply_code", record.reply_code),
        ("smtp.enhanced_status", record.enhanced_status),
        ("email.provider.message_id", record.provider_message_id),
    ):
        if value is not None:
            span.set_attribute(name, value)
    if record.status == Status.PENDING.value:
        span.add_event(
            "retry scheduled",
            {"outbox.delay_seconds": record.delay_seconds, "reason": reason},
        )
    elif record.status != Status.SENT.value:
        span.add_event(record.status, {"reason": reason})
        span.set_status(TraceStatus(StatusCode.ERROR, reason[:200]))


def _slow_down(pacer: Pacer, recipient: str, reply: Reply) -> None:
    """Lower the pace a throttling reply asks for: the receiver's, or ours overall."""
    scope = throttled_scope(reply)
    if scope is None:
        return
    receiver = pacer.receiver_of(recipient)
    key = receiver if scope == "receiver" else GLOBAL
    if key not in {name for name, _ in pacer.limits.for_receiver(receiver)}:
        return  # no configured rate to lower
    factor = pacer.throttled(key)
    if factor is not None:
        log.info("%s throttles (%s): pace now %.0f%% of its rate", key, reply.code, factor * 100)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"


class Delivery:
    def __init__(
        self,
        settings: Settings,
        pool: connections.Pool,
        transport: Transport,
        *,
        rand: Callable[[], float] = random.random,
        stopping: threading.Event | None = None,
        pacer: Pacer | None = None,
        breaker: SharedBreaker | None = None,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.transport = transport
        self.policy = RetryPolicy.from_settings(settings)
        self.templates = template_set(settings.templates)
        # Kept, not looked up per email: hashing the settings costs more than the lookup.
        self.composer = composer(settings)
        self.rand = rand
        self.stopping = stopping or threading.Event()
        self.envelope_from = parseaddr(settings.sender)[1]
        self._unavailable_logged = _Once(per_seconds=60.0)
        self.pacer = pacer
        self.breaker = breaker or SharedBreaker(settings, pool.connection)
        # One state for the process: taking rows and recording results lose and
        # regain Postgres together, and say so once between them.
        self.postgres = DownOnce(log, "Postgres")
        self.results = ResultCommitter(
            functools.partial(
                connections.connect,
                settings.database_url,
                autocommit=True,
                timeout=settings.pool_timeout,
                prepare=settings.prepared_statements == "on",
                generic_plans=True,  # its statements find their rows by id
            ),
            max_age_seconds=settings.max_age_seconds,
            postgres=self.postgres,
        )
        # During an outage each email's return is counted, and logged once per interval.
        self.returned = Summary(log, "emails returned to pending without an attempt")
        self.redactor = Redactor.from_settings(settings)
        self._in_hand: set[int] = set()
        self._in_hand_lock = threading.Lock()

    def close(self, timeout: float = 10.0) -> None:
        """At a clean stop, once no batch is running: results still on their way
        reach Postgres (for at most ``timeout``) and the committer's connection closes."""
        self.results.close(timeout)

    def deliver(self, ids: Sequence[int]) -> None:
        """Send the rows ``ids`` that are still queued; others are acknowledged as done.

        Each result goes to the committer the moment it is known; the next
        message's end-of-data dot waits for its commit (so a kill -9 resends at
        most the message in flight), and the batch returns once all of its
        results are in Postgres.
        """
        worker = worker_name()
        rows = self._take(ids, worker)
        if len(rows) < len(ids):
            log.info(
                "skipped %d of %d rows already taken or finished", len(ids) - len(rows), len(ids)
            )
        committed: list[Committed] = []
        deferred: list[sending.Deferral] = []
        handled = 0  # rows of the batch with a result, a deferral or a hand-back
        previous: Committed | None = None  # the next dot waits for its commit
        try:
            for index, row in enumerate(rows):
                handled = index
                if self.stopping.is_set():
                    self._release([r.id for r in rows[index:]], worker, "worker stopping")
                    break
                if not self._may_send(worker):
                    # The sending path is down: the rest waits in pending, no attempt spent.
                    reason = self._down_reason()
                    committed += self._hand_back(rows[index:], worker, reason)
                    self.returned.add(reason, len(rows) - index)
                    break
                result = self._attempt(row, worker, previous)
                if isinstance(result, sending.Deferral):
                    deferred.append(result)
                    continue
                previous = self.results.submit(worker, result)
                committed.append(previous)
                if isinstance(result, results.Unattempted) and index + 1 < len(rows):
                    # The path just failed: the rest of the batch would wait for the same
                    # timeout each, held `sending`; it goes back untried at once.
                    reason = f"not attempted, the path failed for the previous row: {result.reason}"
                    committed += self._hand_back(rows[index + 1 :], worker, reason[:500])
                    self.returned.add("the path failed for the batch", len(rows) - index - 1)
                    break
            handled = len(rows)
        except BaseException as exc:
            # This live process holds the rows, so no sweep would return them: the
            # ones not sent go back now: everything that can raise here (the breaker's
            # and the pacer's reads) comes before a send or after its result.
            reason = f"not attempted: the batch failed ({exc!r})"[:500]
            committed += self._hand_back(rows[handled:], worker, reason)
            raise
        finally:
            # What was tried is recorded even if something later in the batch failed,
            # and what was paced goes back even if recording failed.
            try:
                for item in committed:
                    item.wait()
            finally:
                try:
                    if deferred:
                        with self.pool.connection() as conn:
                            sending.defer_paced(conn, deferred, worker)
                finally:
                    with self._in_hand_lock:
                        self._in_hand.difference_update(r.id for r in rows)

    def _hand_back(
        self, rows: Sequence[sending.OutboxRow], worker: str, reason: str
    ) -> list[Committed]:
        """Rows of the batch returned to pending untried, through the committer."""
        return [
            self.results.submit(worker, results.Unattempted(row.id, worker, reason, 0.0))
            for row in rows
        ]

    def in_hand(self) -> set[int]:
        """The rows this process's threads hold now: the heartbeat returns any
        other row locked under this process's name (see relaying.sweep_orphans)."""
        with self._in_hand_lock:
            return set(self._in_hand)

    def _take(self, ids: Sequence[int], worker: str) -> list[sending.OutboxRow]:
        """The rows, once Postgres answers: the broker message stays unacknowledged
        meanwhile, so nothing is lost and nothing needs sweeping.

        A take whose commit went unanswered may have taken the rows: the next
        try reads back what this worker holds, and sends it, instead of
        finding the rows no longer queued and leaving them ``sending``."""
        delay = 0.2
        unanswered = False
        while True:
            began = self.postgres.clock()
            try:
                with self.pool.connection(timeout=self.settings.pool_timeout) as conn:
                    rows = sending.take_for_sending(conn, ids, worker)
                    if unanswered:
                        rows = sending.taken_by(conn, ids, worker)
                self.postgres.ok(began=began)
                with self._in_hand_lock:
                    self._in_hand.update(r.id for r in rows)
                return rows
            except StoreError as exc:
                if self.stopping.is_set():
                    raise
                unanswered = True
                self.postgres.failed(f"taking rows: {exc}")
                self.stopping.wait(delay)
                delay = min(1.0, delay * 2)  # back within a second of Postgres

    def _trips_breaker(self, reply: Reply) -> bool:
        """With a failover, the primary's failures are its own breaker's business
        (:mod:`outbox.transports.failover`): only the failover's trip the shared one."""
        if not self.settings.failover_transport:
            return True
        return (reply.via or "").endswith("(failover)")

    def _may_send(self, worker: str) -> bool:
        verdict = self.breaker.gate()
        if verdict is Gate.SEND:
            return True
        return verdict is Gate.PROBE and self.breaker.try_probe(worker)

    def _down_reason(self) -> str:
        state = self.breaker.state()
        last = f": {state.last_error}" if state.last_error else ""
        return f"transport {self.breaker.key} down, waiting for it{last}"

    def _pace(self, row: sending.OutboxRow) -> sending.Deferral | None:
        """Wait for the row's slot under its receiver's rate, or say when to come back."""
        if self.pacer is None:
            return None
        slot = self.pacer.reserve(row.recipient, Priority(row.priority))
        if slot is None:
            return None
        if slot.granted:
            self.stopping.wait(slot.wait)  # a stopping worker sends what it reserved at once
            return None
        log.debug("email %s paced: %s at %s, back in %.2fs", row.id, slot.key, slot.rate, slot.wait)
        reason = f"paced: {slot.key} at {slot.rate}"
        return sending.Deferral(row.id, slot.wait, reason)

    def _attempt(
        self, row: sending.OutboxRow, worker: str, previous: Committed | None = None
    ) -> results.AttemptRecord | sending.Deferral | results.Unattempted:
        """One attempt in its own span: in the business event's trace for a
        login code (a child of the enqueue span, however many hours and retries
        later), linked to it for bulk mail; linked to the queue's consumer span.
        None while tracing is off, when it would be a no-op that still costs its making."""
        if not is_tracing():
            return self._attempt_in_span(row, worker, previous)
        stored = context_from(row.trace_context)
        consumer = trace.get_current_span().get_span_context()
        transactional = row.priority == Priority.HIGH and stored is not None
        parent = stored if transactional else None
        linked = consumer if transactional else span_context_from(row.trace_context)
        with (
            tracer.start_as_current_span(
                "outbox deliver",
                context=parent,
                kind=SpanKind.CLIENT,
                links=[Link(linked)] if linked is not None and linked.is_valid else [],
                **QUIET,
            ) as span,
            failures_by_type(span),
        ):
            record = self._attempt_in_span(row, worker, previous)
            if isinstance(record, sending.Deferral):
                reason = self.redactor.text(record.reason)
                span.add_event("paced", {"reason": reason, "delay": record.delay_seconds})
            elif isinstance(record, results.Unattempted):
                span.add_event("sending path down", {"reason": self.redactor.text(record.reason)})
            elif span.is_recording():
                _describe_attempt(span, row, record, self.redactor)
            return record

    def _attempt_in_span(
        self, row: sending.OutboxRow, worker: str, previous: Committed | None
    ) -> results.AttemptRecord | sending.Deferral | results.Unattempted:
        """Build, pace, send, judge: each step may end the attempt early."""
        started = time.perf_counter()
        gate = _PreviousCommitted(previous)
        built = self._build_or_problem(row, gate)
        if isinstance(built, sending.Deferral):
            return built
        reply: Reply | None = None
        if isinstance(built, Outcome):
            outcome = built
        else:
            # Paced after building, so only the send lies between slot and arrival.
            deferral = self._pace(row)
            if deferral is not None:
                return deferral
            sent = self._send(row, worker, built, gate)
            if isinstance(sent, sending.Deferral | results.Unattempted):
                return sent
            reply, outcome = sent
        return self._judged(row, reply, outcome, started)

    def _build_or_problem(
        self, row: sending.OutboxRow, gate: _PreviousCommitted
    ) -> OutgoingMessage | Outcome | sending.Deferral:
        try:
            return self.build(row, before_commit=gate)
        except AttachmentUnavailable as exc:
            # This worker's storage, not the email: wait for one that sees the
            # file (or for this one to be fixed) without spending an attempt.
            if self._unavailable_logged.ready():
                log.error("email %s waits (and others like it): %s", row.id, exc)
            return sending.Deferral(row.id, _UNAVAILABLE_WAIT, f"waiting for its attachment: {exc}")
        except Exception as exc:
            # Our own defect (a broken template, params of the wrong shape), not
            # the receiver's verdict, and this row's alone: retrying gives an
            # operator time to fix it; the other rows of the batch go on.
            if not isinstance(exc, OutboxError):
                log.exception("building email %s failed", row.id)
            # Stored, logged and traced: no secret in it, whatever the error says.
            problem = self.redactor.secrets_only(str(exc))
            return Outcome(Verdict.RETRY, f"could not build the message: {problem}")

    def _send(
        self,
        row: sending.OutboxRow,
        worker: str,
        message: OutgoingMessage,
        gate: _PreviousCommitted,
    ) -> tuple[Reply | None, Outcome] | sending.Deferral | results.Unattempted:
        """The transport's reply and what it means, or why this was no attempt."""
        try:
            reply = self.transport.send(message)
        except TransportBusy as busy:  # nothing left: back to Postgres, not an attempt
            return sending.Deferral(row.id, busy.retry_after, f"transport busy: {busy}")
        except Exception as exc:
            # A transport defect: where the conversation stopped is unknown,
            # so the message may have left. Retried with the same Message-ID.
            log.exception("transport failed unexpectedly for email %s", row.id)
            problem = self.redactor.secrets_only(repr(exc))
            return None, Outcome(Verdict.UNCERTAIN, f"transport error: {problem}")
        if reply.code is None and reply.stage is Stage.BODY and gate.waited >= 1.0:
            # Cut while the dot waited for Postgres to commit the previous
            # result: nothing about this message was judged, nor could it leave.
            reason = "not an attempt, waited for the previous result to be recorded"
            self.returned.add("waited for Postgres to record the previous result")
            return results.Unattempted(row.id, worker, reason, 0.0)
        if is_path_failure(reply):
            return self._path_failed(row, worker, reply)
        self.breaker.observe(worker, failure=False)
        outcome = classify_reply(reply)  # SMTP or HTTP rules by the reply's kind
        if self.pacer is not None and outcome.verdict != Verdict.SENT:
            _slow_down(self.pacer, row.recipient, reply)
        return reply, outcome

    def _path_failed(
        self, row: sending.OutboxRow, worker: str, reply: Reply
    ) -> results.Unattempted:
        """Our path failed, not this message: no attempt; the breaker counts it."""
        failure = describe_failure(reply)
        if self._trips_breaker(reply):
            self.breaker.observe(worker, failure=True, error=failure)
        reason = f"not an attempt, sending path failed: {failure}"
        self.returned.add(f"sending path failed: {failure}")
        spread = min(self.settings.outage_probe_seconds, self.policy.base_seconds)
        # A provider's Retry-After is still a floor: sooner only earns another 429.
        delay = max(self.rand() * spread, getattr(reply, "retry_after", None) or 0.0)
        return results.Unattempted(row.id, worker, reason, delay)

    def _judged(
        self, row: sending.OutboxRow, reply: Reply | None, outcome: Outcome, started: float
    ) -> results.AttemptRecord:
        """The attempt as it is recorded: the retry policy's decision on the outcome."""
        now = dt.datetime.now(dt.UTC)
        decision = decide(
            outcome,
            attempt=row.attempts,
            age_seconds=(now - row.age_from).total_seconds(),
            policy=self.policy,
            rand=self.rand,
        )
        duration_ms = (time.perf_counter() - started) * 1000
        level = _LOG_LEVELS[decision.status]
        if log.isEnabledFor(level):
            log.log(
                level,
                "email %s to %s attempt %d: %s (%s)",
                row.id,
                recipient_tag(row.recipient, secret=self.settings.secret),
                row.attempts,
                decision.status.value,
                self.redactor.text(decision.reason),
            )
        return results.AttemptRecord(
            id=row.id,
            attempt=row.attempts,
            status=decision.status.value,
            reason=decision.reason,
            delay_seconds=decision.delay_seconds,
            provider_message_id=outcome.provider_message_id,
            verdict=outcome.verdict.value,
            stage=reply.stage.value if reply else None,
            reply_code=reply.code if reply else None,
            enhanced_status=outcome.enhanced_status,
            reply_text=(reply.text or reply.error) if reply else outcome.reason,
            duration_ms=duration_ms,
            transport=(reply.via if reply else None) or self.settings.transport,
            suppress=reply is not None and refuses_address(reply),
            recipients=_each_recipient(reply) if reply and reply.recipients else None,
        )

    def build(
        self, row: sending.OutboxRow, *, before_commit: Callable[[], None] | None = None
    ) -> OutgoingMessage:
        ascii_recipient = row.recipient if row.recipient.isascii() else ascii_address(row.recipient)
        recipient = ascii_recipient or row.recipient
        # Template version, list headers, attachments and DKIM: outbox.message.compose.
        data = self.composer.message(row, to=recipient, connect=self.pool.connection)
        return OutgoingMessage(
            envelope_from=self._return_path(row),
            recipient=recipient,
            data=data,
            message_id=row.message_id,
            idempotency_key=row.idempotency_key,
            smtputf8=ascii_recipient is None,
            cc=tuple(row.cc),
            bcc=tuple(row.bcc),
            tags=tuple(row.tags),
            metadata=tuple((k, labels.as_text(v)) for k, v in row.metadata.items()),
            before_commit=before_commit,
        )

    def _return_path(self, row: sending.OutboxRow) -> str:
        """VERP when a bounce domain is set: the bounce names its row."""
        settings = self.settings
        if not settings.bounce_domain:
            return _address_of(row.sender) if row.sender else self.envelope_from
        return return_path(row.id, domain=settings.bounce_domain, secret=settings.secret)

    def _release(self, ids: list[int], worker: str, reason: str) -> None:
        with self.pool.connection() as conn:
            sending.release_unattempted(conn, ids, worker, reason)
        log.info("released %d unattempted rows: %s", len(ids), reason)


@functools.lru_cache(maxsize=256)
def _address_of(sender: str) -> str:
    """The address of a From header (an application sends from a few): parsed once each."""
    return parseaddr(sender)[1]


class _PreviousCommitted:
    """Called by the transport just before the message may leave (the SMTP dot,
    an HTTP request): waits until the thread's previous result is committed, so
    a crash resends at most one message per thread, and says how long it waited."""

    __slots__ = ("previous", "waited")

    def __init__(self, previous: Committed | None) -> None:
        self.previous = previous
        self.waited = 0.0

    def __call__(self) -> None:
        if self.previous is None or self.previous.done():
            return
        started = time.monotonic()
        # A previous result Postgres refused is the batch's error, raised when
        # the batch ends; it says nothing about this message's send.
        with contextlib.suppress(StoreError):
            self.previous.wait()
        self.waited = time.monotonic() - started


def _each_recipient(reply: Reply) -> list[dict[str, Any]]:
    """Each recipient's RCPT reply of a message with cc or bcc, as the attempt stores it."""
    return [
        {"address": r.address, "kind": r.kind, "code": r.code, "text": texts.storable_text(r.text)}
        for r in reply.recipients
    ]


class _Once:
    """True at most once per interval: one log line for a condition many rows share."""

    def __init__(self, per_seconds: float) -> None:
        self.per_seconds = per_seconds
        self._next = 0.0
        self._lock = threading.Lock()

    def ready(self) -> bool:
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                return False
            self._next = now + self.per_seconds
            return True
