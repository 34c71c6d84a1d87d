"""Outbox metrics for Prometheus (pure): query results in, metric families out.

A scrape must stay cheap on a table of ten million rows, so the exporter
(:mod:`outbox.telemetry.metrics_server`) never counts the history. It counts the rows
once when it starts, then follows three append-only id sequences: new outbox
rows, status changes (``email_event``, written by a trigger for every change)
and attempts. Each scrape reads only the ids above the previous scrape's
highest, plus the ids that were missing then: a transaction that took an id
may commit after a later one, so a missing id is looked for again until
:data:`GAP_TTL` (a rolled-back insert leaves a hole for good).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from outbox.models import Priority, Status

PRIORITIES = tuple(p.value for p in Priority)
STATUSES = tuple(s.value for s in Status)
# Counted exactly on every scrape: the relay keeps at most OUTBOX_MAX_IN_FLIGHT of them.
IN_FLIGHT = (Status.QUEUED.value, Status.SENDING.value)
SETTLED = (Status.SENT.value, Status.FAILED.value, Status.DEAD.value)
REPLY_CLASSES = ("4xx", "connection", "timeout", "uncertain", "other")
BOUNCE_CLASSES = ("hard", "soft", "complaint")

SEND_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# From a login code's second to a newsletter's hours; past a day a row is dead anyway.
LATENCY_BUCKETS = (
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
    4 * 3600.0, 86400.0,
)  # fmt: skip

# Longer than any transaction of this project stays open; the sweeper gives up
# on a send after OUTBOX_STUCK_SECONDS (300) already.
GAP_TTL = 900.0
DAY_MINUTES = 24 * 60


def reply_class(verdict: str, reply_code: int | None, what_broke: str | None) -> str:
    """Why an attempt is tried again, from what ``email_attempt`` recorded.

    ``what_broke`` is the first words of a reply text without a code: the
    transport's description of a broken exchange ("timeout", "connection
    refused", "tls: …", "OSError: …").
    """
    if verdict == "uncertain":
        return "uncertain"
    if reply_code is not None:
        # A 5yz to the session or a 1yz/3yz is retried too, but says nothing about the receiver.
        return "4xx" if 400 <= reply_code < 500 else "other"
    text = (what_broke or "").strip().lower()
    if "timeout" in text or "timed out" in text:
        return "timeout"
    if text.startswith(("connection", "tls", "dns", "oserror", "brokenpipe")):
        return "connection"
    return "other"


@dataclass
class Histogram:
    """Counts per ``width_bucket`` index: 0 below the first bound, len(bounds) above the last."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = self.counts or [0] * (len(self.bounds) + 1)

    def add(self, index: int, n: int, total: float) -> None:
        self.counts[min(max(index, 0), len(self.bounds))] += n
        self.total += total

    def buckets(self) -> list[tuple[str, float]]:
        cumulative, out = 0, []
        for bound, count in zip(self.bounds, self.counts, strict=False):
            cumulative += count
            out.append((_le(bound), float(cumulative)))
        out.append(("+Inf", float(sum(self.counts))))
        return out


def _le(bound: float) -> str:
    return str(float(bound))


@dataclass
class Cursor:
    """How far one append-only id sequence has been read."""

    after: int  # every id up to here was read, except the gaps
    gaps: dict[int, float] = field(default_factory=dict)  # missing id -> database time first missed

    def advance(self, upto: int, missing: Iterable[int], found: Iterable[int], now: float) -> None:
        for gap in found:
            self.gaps.pop(gap, None)
        for gap in missing:
            self.gaps.setdefault(gap, now)
        self.gaps = {gap: t for gap, t in self.gaps.items() if now - t < GAP_TTL}
        self.after = max(self.after, upto)


@dataclass(frozen=True)
class StreamRead:
    """One scrape's read of one id sequence: rows are the query's, as they come."""

    upto: int
    missing: Sequence[int]
    found: Sequence[int]
    rows: Sequence[Sequence[Any]]


@dataclass(frozen=True)
class Current:
    """Values read whole on every scrape (each from the head of an index)."""

    now: float  # database clock, epoch seconds
    in_flight: dict[tuple[str, str], int]  # (status, priority)
    oldest_unsent: dict[str, float]  # priority -> seconds
    oldest_due: dict[str, float]  # priority -> seconds a due pending row has waited
    bounces_24h: dict[str, int]  # bounce class -> rows
    suppressed_addresses: int
    # (source, outcome) -> bounce reports received; outcome: how it linked, forged, unprocessed
    bounce_reports_24h: dict[tuple[str, str], int] = field(default_factory=dict)
    # transport -> seconds its breaker has been open (0: up), from outbox_breaker
    transports_down: dict[str, float] = field(default_factory=dict)
    # (domain, check) -> 0 ok, 1 warning, 2 error: the last `outbox domain check`
    domain_checks: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass(frozen=True)
class Scrape:
    rows: StreamRead  # (priority, suppressed, count)
    # (priority, from, to, count, latest at, latency bucket, minute sent, latency sum);
    # the last three only for rows marked sent
    events: StreamRead
    attempts: StreamRead  # (priority, verdict, code, what broke, duration bucket, count, sum)
    current: Current


@dataclass
class Tally:
    """Everything the exporter carries from one scrape to the next."""

    rows: Cursor
    events: Cursor
    attempts: Cursor
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # outside in flight
    sent_minutes: Counter[int] = field(default_factory=Counter)
    last_publish: float | None = None
    enqueued: Counter[str] = field(default_factory=Counter)
    settled: Counter[tuple[str, str]] = field(default_factory=Counter)  # (status, priority)
    retries: Counter[tuple[str, str]] = field(default_factory=Counter)  # (priority, class)
    send_duration: dict[str, Histogram] = field(default_factory=dict)
    enqueue_to_sent: dict[str, Histogram] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for priority in PRIORITIES:
            self.send_duration.setdefault(priority, Histogram(SEND_BUCKETS))
            self.enqueue_to_sent.setdefault(priority, Histogram(LATENCY_BUCKETS))

    @classmethod
    def seeded(
        cls,
        counts: Iterable[Sequence[Any]],
        sent_minutes: Iterable[Sequence[Any]],
        last_publish: float | None,
        cursors: tuple[Cursor, Cursor, Cursor],
    ) -> Tally:
        tally = cls(*cursors, last_publish=last_publish)
        for status, priority, n in counts:
            tally.counts[(status, priority)] += int(n)
        for minute, n in sent_minutes:
            tally.sent_minutes[int(minute)] += int(n)
        return tally

    def apply(self, scrape: Scrape) -> None:
        now = scrape.current.now
        for priority, suppressed, n in scrape.rows.rows:
            self.enqueued[priority] += n
            # enqueue writes `suppressed` (for good) or `pending`; later changes are events.
            status = Status.SUPPRESSED if suppressed else Status.PENDING
            self.counts[(status.value, priority)] += n
        for priority, before, after, n, latest, bucket, minute, latency in scrape.events.rows:
            if before == after:  # a bounce noted on its row: no change of status
                continue
            if bucket is not None:
                self.enqueue_to_sent[priority].add(bucket, n, latency)
                self.sent_minutes[int(minute)] += n
            if before is not None and before not in IN_FLIGHT:
                self.counts[(before, priority)] -= n
            if after not in IN_FLIGHT:
                self.counts[(after, priority)] += n
            if after in SETTLED:
                self.settled[(after, priority)] += n
            if after == Status.QUEUED and latest is not None:
                self.last_publish = max(self.last_publish or 0.0, latest)
        for priority, verdict, code, broke, bucket, n, total in scrape.attempts.rows:
            if verdict in ("retry", "uncertain"):
                self.retries[(priority, reply_class(verdict, code, broke))] += n
            if bucket is not None:  # the sweeper's attempts have no duration
                self.send_duration[priority].add(bucket, n, total)
        for cursor, read in (
            (self.rows, scrape.rows),
            (self.events, scrape.events),
            (self.attempts, scrape.attempts),
        ):
            cursor.advance(read.upto, read.missing, read.found, now)
        self._forget_minutes_before(now)

    def _forget_minutes_before(self, now: float) -> None:
        oldest = int(now // 60) - DAY_MINUTES
        for minute in [m for m in self.sent_minutes if m < oldest]:
            del self.sent_minutes[minute]

    def sent_last_24h(self, now: float) -> int:
        oldest = int(now // 60) - DAY_MINUTES
        return sum(n for minute, n in self.sent_minutes.items() if minute > oldest)


def families(tally: Tally, current: Current | None) -> list[Metric]:
    """The metric families of one scrape; ``current`` is None when the database did not answer."""
    out: list[Metric] = []
    enqueued = CounterMetricFamily(
        "outbox_enqueued", "Emails enqueued (suppressed audit rows included).", labels=["priority"]
    )
    for priority in PRIORITIES:
        enqueued.add_metric([priority], tally.enqueued[priority])
    out.append(enqueued)
    for status, text in (
        ("sent", "Emails the relay accepted (2yz)."),
        ("failed", "Emails refused for good (5yz)."),
        ("dead", "Emails whose attempts or age ran out."),
    ):
        family = CounterMetricFamily(f"outbox_{status}", text, labels=["priority"])
        for priority in PRIORITIES:
            family.add_metric([priority], tally.settled[(status, priority)])
        out.append(family)
    retries = CounterMetricFamily(
        "outbox_retries",
        "Attempts that will be tried again (verdict retry or uncertain), by why.",
        labels=["priority", "reply_class"],
    )
    for priority in PRIORITIES:
        for klass in REPLY_CLASSES:
            retries.add_metric([priority, klass], tally.retries[(priority, klass)])
    out.append(retries)
    for name, text, histograms in (
        ("outbox_send_duration_seconds", "One attempt: build and SMTP.", tally.send_duration),
        (
            "outbox_enqueue_to_sent_seconds",
            "From enqueue (created_at) to the relay's 2yz (sent_at).",
            tally.enqueue_to_sent,
        ),
    ):
        hist = HistogramMetricFamily(name, text, labels=["priority"])
        for priority, histogram in histograms.items():
            hist.add_metric([priority], histogram.buckets(), sum_value=histogram.total)
        out.append(hist)
    if current is not None:
        out += _current_families(tally, current)
    return out


def _current_families(tally: Tally, current: Current) -> list[Metric]:
    emails = GaugeMetricFamily(
        "outbox_emails", "Rows per status and priority.", labels=["status", "priority"]
    )
    for status in STATUSES:
        for priority in PRIORITIES:
            if status in IN_FLIGHT:
                value = current.in_flight.get((status, priority), 0)
            else:
                value = tally.counts[(status, priority)]
            emails.add_metric([status, priority], value)
    oldest = GaugeMetricFamily(
        "outbox_oldest_unsent_age_seconds",
        "Age of the oldest row pending, queued or sending (from enqueue or requeue); 0 if none.",
        labels=["priority"],
    )
    due = GaugeMetricFamily(
        "outbox_oldest_due_age_seconds",
        "How long the oldest due pending row has waited for a relay; 0 if none is due.",
        labels=["priority"],
    )
    for priority in PRIORITIES:
        oldest.add_metric([priority], current.oldest_unsent.get(priority, 0.0))
        due.add_metric([priority], current.oldest_due.get(priority, 0.0))
    publish = GaugeMetricFamily(
        "outbox_relay_last_publish_age_seconds",
        "Seconds since a relay last claimed rows (+Inf if none ever did).",
        value=current.now - tally.last_publish if tally.last_publish else math.inf,
    )
    sent = tally.sent_last_24h(current.now)
    bounces = GaugeMetricFamily(
        "outbox_bounces_24h",
        "Rows whose bounce or complaint arrived in the last 24 h.",
        labels=["class"],
    )
    for klass in BOUNCE_CLASSES:
        bounces.add_metric([klass], current.bounces_24h.get(klass, 0))
    reports = GaugeMetricFamily(
        "outbox_bounce_reports_24h",
        "Bounce and complaint reports received in the last 24 h, by source (mail, postmark, "
        "resend) and outcome (verp, message_id, provider_id, none, forged, unprocessed).",
        labels=["source", "outcome"],
    )
    for (source, outcome), n in sorted(current.bounce_reports_24h.items()):
        reports.add_metric([source, outcome], n)
    bounced = current.bounces_24h.get("hard", 0) + current.bounces_24h.get("soft", 0)
    complained = current.bounces_24h.get("complaint", 0)
    return [
        emails,
        oldest,
        due,
        publish,
        GaugeMetricFamily("outbox_sent_24h", "Rows sent in the last 24 h.", value=sent),
        bounces,
        reports,
        GaugeMetricFamily(
            "outbox_bounce_rate_24h",
            "Hard and soft bounces over rows sent, last 24 h; 0 when nothing was sent.",
            value=bounced / sent if sent else 0.0,
        ),
        GaugeMetricFamily(
            "outbox_complaint_rate_24h",
            "Complaints over rows sent, last 24 h; 0 when nothing was sent.",
            value=complained / sent if sent else 0.0,
        ),
        GaugeMetricFamily(
            "outbox_suppressed_addresses",
            "Addresses on the suppression list.",
            value=current.suppressed_addresses,
        ),
        *_transport_families(current),
        _domain_family(current),
    ]


def _domain_family(current: Current) -> Metric:
    checks = GaugeMetricFamily(
        "outbox_domain_check",
        "The last authentication check of each sending domain: 0 ok, 1 warning, 2 error "
        "(`outbox domain check` says what to publish).",
        labels=["domain", "check"],
    )
    for (domain, check), state in sorted(current.domain_checks.items()):
        checks.add_metric([domain, check], state)
    return checks


def _transport_families(current: Current) -> list[Metric]:
    up = GaugeMetricFamily(
        "outbox_transport_up",
        "0 while the sending path's breaker is open (the transport is down), else 1.",
        labels=["transport"],
    )
    down = GaugeMetricFamily(
        "outbox_transport_down_seconds",
        "How long the transport's breaker has been open; 0 when it is up.",
        labels=["transport"],
    )
    for transport, seconds in sorted(current.transports_down.items()):
        up.add_metric([transport], 0 if seconds > 0 else 1)
        down.add_metric([transport], seconds)
    return [up, down]
