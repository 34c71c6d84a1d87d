"""Bounces and complaints in: store, parse, link to a row, act.

A bounce is stored first and processed from the stored copy, so a crash
between receiving and processing loses nothing (`outbox bounces reprocess`
and the bounce server's start-up pick up what was left).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from opentelemetry.trace import Link as TraceLink
from opentelemetry.trace import Span, SpanKind
from prometheus_client import Counter

from outbox.bounce_parsing import BounceResult, parse_bounce, providers
from outbox.bounce_receiving.parse_worker import ParseDeadlineExceeded
from outbox.bounce_receiving.policy import (
    Effect,
    Link,
    Via,
    effects,
    rights,
    soft_streak_reached,
)
from outbox.config import Settings
from outbox.db.store import bounce_reports, connections, suppressions
from outbox.message.return_path import Kind, read_token, row_token_from_address
from outbox.models import Priority
from outbox.redact import recipient_tag
from outbox.telemetry.tracing import (
    QUIET,
    context_from,
    email_attributes,
    failures_by_type,
    span_context_from,
    tracer,
)

log = logging.getLogger(__name__)

# How a message is parsed: in this thread (parse_bounce), or in a child process
# within a deadline (outbox.bounce_receiving.parse_worker) where a message
# could stop more than itself.
Parse = Callable[[bytes], list[BounceResult]]

UNPROCESSABLE = Counter(
    "outbox_bounce_unprocessable",
    "Stored bounces set aside because processing failed on them, by cause",
    ["cause"],
)
CAUSES = ("parse_deadline", "error")
for _cause in CAUSES:
    UNPROCESSABLE.labels(_cause)  # present at 0 from the start


@dataclass(frozen=True)
class Processed:
    bounce_id: int
    link: Link
    results: list[BounceResult]
    suppressed: list[str]  # addresses added to the suppression list
    unprocessable: str | None = None  # set aside: why processing failed


def process_bounce(
    conn: connections.Conn, bounce_id: int, settings: Settings, parse: Parse = parse_bounce
) -> Processed | None:
    """Parse one stored bounce and apply it; None if it was already processed."""
    stored = bounce_reports.load_bounce(conn, bounce_id)
    if stored is None or stored.processed_at is not None:
        return None
    if stored.source == "mail":
        results = parse(stored.raw)
        link = _link(conn, stored, results, settings)
    else:
        report = providers.parse(stored.source, stored.raw)
        results = report.results
        link = _provider_link(conn, report, bounce_id)
    if link.forged:
        log.warning("bounce #%d carries a forged VERP token; stored, not acted on", bounce_id)
    elif link.via == "verp" and rights(link) != "all":
        log.info(
            "bounce #%d came by a %s token: it may %s only", bounce_id, link.proof, rights(link)
        )
    elif link.via == "message_id":
        # Anyone can quote a Message-ID (outbox.bounce_receiving.policy): recorded, not acted on.
        log.info("bounce #%d is linked by Message-ID only; recorded, not acted on", bounce_id)
    with _bounce_span(conn, stored, link, results, settings.secret) as span:
        suppressed = _apply(conn, bounce_id, link, results, settings)
        span.set_attribute("outbox.bounce.suppressed", bool(suppressed))
    bounce_reports.finish_bounce(
        conn,
        bounce_id,
        outbox_id=link.outbox_id,
        link=link.via,
        forged=link.forged,
        results=[r.to_json() for r in results],
    )
    return Processed(bounce_id, link, results, suppressed)


def _apply(
    conn: connections.Conn,
    bounce_id: int,
    link: Link,
    results: list[BounceResult],
    settings: Settings,
) -> list[str]:
    """Record the verdicts on the row and suppress; the addresses suppressed."""
    suppressed: list[str] = []
    for effect in effects(link, results):
        assert link.outbox_id is not None
        bounce_reports.mark_bounced(
            conn,
            link.outbox_id,
            klass=effect.klass,
            reason=effect.reason,
            bounce_id=bounce_id,
            event=_event_type(effect),
        )
        if effect.suppress == "soft_streak":
            recent = bounce_reports.recent_sends_to(
                conn, effect.address, settings.soft_bounce_limit
            )
            if not soft_streak_reached(recent, settings.soft_bounce_limit):
                continue
            reason, detail = "soft_bounces", f"{settings.soft_bounce_limit} soft bounces in a row"
        else:
            reason, detail = str(effect.suppress), effect.reason
        scope = effect.scope
        if suppressions.suppress(
            conn,
            effect.address,
            reason=reason,
            scope=scope,
            detail=detail,
            source_bounce_id=bounce_id,
        ):
            suppressed.append(effect.address)
            tag = recipient_tag(effect.address, secret=settings.secret)
            log.info("suppressed %s: %s", tag, detail)
    return suppressed


def _event_type(effect: Effect) -> str:
    """What the application is told of a verdict (outbox.events)."""
    if effect.suppress == "unsubscribe":
        return "email.unsubscribed"
    return "email.complained" if effect.klass == "complaint" else "email.bounced"


@contextmanager
def _bounce_span(
    conn: connections.Conn,
    stored: bounce_reports.StoredBounce,
    link: Link,
    results: list[BounceResult],
    tag_secret: str,
) -> Iterator[Span]:
    """The bounce in its email's trace: a child of the enqueue span for a login
    code, as its attempts are, and linked to it for bulk mail."""
    row = bounce_reports.bounced_row_trace(conn, link.outbox_id) if link.outbox_id else None
    parent = context_from(row.trace_context) if row else None
    transactional = row is not None and row.priority == Priority.HIGH and parent is not None
    linked = span_context_from(row.trace_context) if row and not transactional else None
    with tracer.start_as_current_span(
        "outbox bounce",
        context=parent if transactional else None,
        kind=SpanKind.CONSUMER,
        links=[TraceLink(linked)] if linked is not None else [],
        **QUIET,
    ) as span:
        if span.is_recording():
            span.set_attributes(_bounce_attributes(stored, link, results, row, tag_secret))
        with failures_by_type(span):
            yield span


def _bounce_attributes(
    stored: bounce_reports.StoredBounce,
    link: Link,
    results: list[BounceResult],
    row: bounce_reports.RowTrace | None,
    tag_secret: str,
) -> dict[str, str | int | bool]:
    attributes: dict[str, str | int | bool] = {
        "outbox.bounce.id": stored.id,
        "outbox.bounce.source": stored.source,
        "outbox.bounce.link": link.via,
        "outbox.bounce.forged": link.forged,
    }
    if row is not None and link.outbox_id is not None and link.recipient is not None:
        attributes.update(
            email_attributes(
                outbox_id=link.outbox_id,
                idempotency_key=row.idempotency_key,
                message_id=row.message_id,
                template=row.template,
                priority=row.priority,
                recipient=link.recipient,
                tag_secret=tag_secret,
            )
        )
        if row.provider_message_id:
            attributes["email.provider.message_id"] = row.provider_message_id
    if results:
        first = results[0]
        attributes["outbox.bounce.class"] = first.klass
        attributes["outbox.bounce.status"] = first.status or ""
        attributes["outbox.bounce.reason"] = first.reason or ""
        attributes["outbox.bounce.recipients"] = len(results)
    return attributes


def ingest(
    conn: connections.Conn,
    raw: bytes,
    settings: Settings,
    envelope_to: str | None = None,
    parse: Parse = parse_bounce,
) -> Processed:
    """Store a bounce, commit, then process it (a pipe transport or a file)."""
    bounce_id = bounce_reports.store_bounce(conn, raw, envelope_to)
    connections.commit(conn)
    processed = process_or_set_aside(conn, bounce_id, settings, parse)
    assert processed is not None  # stored a moment ago
    return processed


def process_pending(conn: connections.Conn, settings: Settings, parse: Parse = parse_bounce) -> int:
    """Process every stored bounce not yet processed; returns how many."""
    done = 0
    for bounce_id in bounce_reports.unprocessed_bounces(conn):
        if process_or_set_aside(conn, bounce_id, settings, parse) is not None:
            done += 1
    return done


def process_or_set_aside(
    conn: connections.Conn, bounce_id: int, settings: Settings, parse: Parse = parse_bounce
) -> Processed | None:
    """Process one stored report and commit; None if it was processed before.

    No report may stop the ones after it: one that fails for a reason of its
    own (a parser defect, a value the database refuses) is marked
    unprocessable with the reason and skipped, as is one that takes longer
    than its deadline to parse: set aside once, never retried in a loop. A
    lost database connection is not the report's fault: it stays unprocessed
    for the next run.
    """
    try:
        processed = process_bounce(conn, bounce_id, settings, parse)
        connections.commit(conn)
        return processed
    except Exception as exc:
        if connections.connection_lost(exc, conn):
            raise
        connections.rollback(conn)
        reason = f"{type(exc).__name__}: {exc}"
        bounce_reports.mark_bounce_unprocessable(conn, bounce_id, reason)
        connections.commit(conn)
        cause = "parse_deadline" if isinstance(exc, ParseDeadlineExceeded) else "error"
        UNPROCESSABLE.labels(cause).inc()
        # The reason may quote the report; the log names only the kind of failure.
        log.warning("bounce #%d cannot be processed (%s); set aside", bounce_id, type(exc).__name__)
        return Processed(bounce_id, Link("none"), [], [], unprocessable=reason)


def _provider_link(
    conn: connections.Conn, report: providers.ProviderReport, bounce_id: int
) -> Link:
    if report.provider_message_id:
        found = bounce_reports.find_row_by_provider_id(
            conn,
            provider=report.provider,
            provider_message_id=report.provider_message_id,
            bounce_id=bounce_id,
        )
        if found:
            return _row_link("provider_id", found)
    return Link("none")


def _row_link(via: Via, row: bounce_reports.BouncedRow, kind: Kind = "bounce") -> Link:
    return Link(via, row.id, row.recipient, copies=row.copies, proof=kind, bulk=row.bulk)


def _link(
    conn: connections.Conn,
    stored: bounce_reports.StoredBounce,
    results: list[BounceResult],
    settings: Settings,
) -> Link:
    tokens = [row_token_from_address(stored.envelope_to or "")]
    tokens += [r.verp_token for r in results]
    token = next((t for t in tokens if t), None)
    if token is not None and settings.secret:
        verified = read_token(token, secret=settings.secret, previous=settings.previous_secret_list)
        if verified is None:
            return Link("none", forged=True)
        found = bounce_reports.find_row_for_bounce(
            conn, outbox_id=verified.outbox_id, message_id=None
        )
        if found:
            return _row_link("verp", found, verified.kind)
    for result in results:
        if result.original_message_id:
            found = bounce_reports.find_row_for_bounce(
                conn, outbox_id=None, message_id=result.original_message_id
            )
            if found:
                return _row_link("message_id", found)
    return Link("none")
