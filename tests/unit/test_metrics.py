"""Query results to metric families (outbox.telemetry.metrics, pure)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from prometheus_client.core import Metric

from outbox.telemetry.metrics import (
    GAP_TTL,
    LATENCY_BUCKETS,
    SEND_BUCKETS,
    Current,
    Cursor,
    Histogram,
    Scrape,
    StreamRead,
    Tally,
    families,
    reply_class,
)

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("verdict", "code", "broke", "expected"),
    [
        ("retry", 451, None, "4xx"),
        ("retry", 421, None, "4xx"),
        ("retry", 530, None, "other"),  # 5yz to AUTH: our session, retried
        ("retry", 354, None, "other"),  # a broken peer
        ("retry", None, "timeout", "timeout"),
        ("retry", None, "connection refused", "connection"),
        ("retry", None, "connection closed", "connection"),
        ("retry", None, "connection reset", "connection"),
        ("retry", None, "tls", "connection"),
        ("retry", None, "dns", "connection"),
        ("retry", None, "oserror", "connection"),
        ("retry", None, "could not build the message", "other"),
        ("retry", None, None, "other"),
        ("uncertain", None, "timeout", "uncertain"),
        ("uncertain", None, "worker lost while sending", "uncertain"),
    ],
)
def test_reply_class(verdict: str, code: int | None, broke: str | None, expected: str) -> None:
    assert reply_class(verdict, code, broke) == expected


def test_cursor_follows_gaps_until_found_or_expired() -> None:
    cursor = Cursor(10)
    cursor.advance(15, missing=[12, 14], found=[], now=NOW)
    assert (cursor.after, set(cursor.gaps)) == (15, {12, 14})
    cursor.advance(15, missing=[], found=[12], now=NOW + 1)
    assert set(cursor.gaps) == {14}
    cursor.advance(20, missing=[], found=[], now=NOW + GAP_TTL + 1)
    assert (cursor.after, cursor.gaps) == (20, {})


def test_histogram_buckets_are_cumulative() -> None:
    histogram = Histogram((1.0, 5.0))
    histogram.add(0, 2, 1.0)  # below 1
    histogram.add(1, 3, 6.0)  # 1 to 5
    histogram.add(2, 1, 9.0)  # above 5
    assert histogram.buckets() == [("1.0", 2.0), ("5.0", 5.0), ("+Inf", 6.0)]
    assert histogram.total == 16.0


def current(**overrides: Any) -> Current:
    values: dict[str, Any] = {
        "now": NOW,
        "in_flight": {},
        "oldest_unsent": {},
        "oldest_due": {},
        "bounces_24h": {},
        "suppressed_addresses": 0,
    }
    return Current(**{**values, **overrides})


def nothing(upto: int) -> StreamRead:
    return StreamRead(upto, [], [], [])


def tally() -> Tally:
    return Tally.seeded(
        [("sent", "bulk", 100), ("pending", "bulk", 5), ("failed", "high", 1)],
        [(int(NOW // 60) - 10, 100)],
        NOW - 30,
        (Cursor(100), Cursor(1000), Cursor(500)),
    )


def samples(metrics: list[Metric]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for m in metrics for s in m.samples}


def test_a_scrape_moves_counts_and_counters() -> None:
    t = tally()
    t.apply(
        Scrape(
            rows=StreamRead(103, [], [], [("bulk", False, 2), ("bulk", True, 1)]),
            events=StreamRead(
                1006,
                [1004],
                [],
                [
                    ("bulk", "pending", "queued", 4, NOW - 2, None, None, None),
                    ("bulk", "queued", "sending", 4, NOW - 2, None, None, None),
                    ("bulk", "sending", "sent", 3, NOW - 1, 3, int(NOW // 60), 4.5),
                    ("bulk", "sending", "pending", 1, NOW - 1, None, None, None),
                    ("high", "failed", "pending", 1, NOW - 1, None, None, None),  # requeued
                    ("bulk", "sent", "sent", 2, NOW, None, None, None),  # bounces noted
                ],
            ),
            attempts=StreamRead(
                504,
                [],
                [],
                [
                    ("bulk", "sent", 250, None, 6, 3, 0.3),
                    ("bulk", "retry", 451, None, 5, 1, 0.05),
                    ("bulk", "uncertain", None, "worker lost while sending", None, 1, 0.0),
                ],
            ),
            current=current(in_flight={("queued", "bulk"): 7}),
        )
    )
    got = samples(families(t, current(in_flight={("queued", "bulk"): 7})))
    emails = {k[1]: v for k, v in got.items() if k[0] == "outbox_emails" and v}
    assert emails == {
        (("priority", "bulk"), ("status", "pending")): 5 + 2 - 4 + 1,
        (("priority", "bulk"), ("status", "queued")): 7,  # read whole, not counted
        (("priority", "bulk"), ("status", "sent")): 103,
        (("priority", "bulk"), ("status", "suppressed")): 1,
        (("priority", "high"), ("status", "pending")): 1,
    }
    assert got[("outbox_sent_total", (("priority", "bulk"),))] == 3
    assert got[("outbox_enqueued_total", (("priority", "bulk"),))] == 3
    assert got[("outbox_retries_total", (("priority", "bulk"), ("reply_class", "4xx")))] == 1
    assert got[("outbox_retries_total", (("priority", "bulk"), ("reply_class", "uncertain")))] == 1
    assert got[("outbox_send_duration_seconds_count", (("priority", "bulk"),))] == 4
    le = str(SEND_BUCKETS[5])
    assert got[("outbox_send_duration_seconds_bucket", (("le", le), ("priority", "bulk")))] == 1
    assert got[("outbox_enqueue_to_sent_seconds_sum", (("priority", "bulk"),))] == 4.5
    le = str(LATENCY_BUCKETS[3])
    assert got[("outbox_enqueue_to_sent_seconds_bucket", (("le", le), ("priority", "bulk")))] == 3
    assert got[("outbox_relay_last_publish_age_seconds", ())] == 2
    assert got[("outbox_sent_24h", ())] == 103
    assert (t.rows.after, t.events.after, t.attempts.after) == (103, 1006, 504)
    assert set(t.events.gaps) == {1004}


def test_rates_over_the_last_day() -> None:
    t = tally()
    got = samples(families(t, current(bounces_24h={"hard": 2, "soft": 1, "complaint": 1})))
    assert got[("outbox_bounce_rate_24h", ())] == 0.03
    assert got[("outbox_complaint_rate_24h", ())] == 0.01
    t.apply(Scrape(nothing(100), nothing(1000), nothing(500), current(now=NOW + 86400)))
    got = samples(families(t, current(now=NOW + 86400, bounces_24h={"hard": 2})))
    assert got[("outbox_sent_24h", ())] == 0
    assert got[("outbox_bounce_rate_24h", ())] == 0  # nothing sent: 0, not a division by zero
    assert t.sent_minutes == {}


def test_bounce_reports_by_source_and_outcome() -> None:
    reports = {("mail", "verp"): 40, ("mail", "forged"): 1, ("postmark", "provider_id"): 7}
    got = samples(families(tally(), current(bounce_reports_24h=reports)))
    name = "outbox_bounce_reports_24h"
    assert got[(name, (("outcome", "verp"), ("source", "mail")))] == 40
    assert got[(name, (("outcome", "forged"), ("source", "mail")))] == 1
    assert got[(name, (("outcome", "provider_id"), ("source", "postmark")))] == 7
    assert len([k for k in got if k[0] == name]) == 3


def test_never_published_and_database_down() -> None:
    t = Tally(Cursor(0), Cursor(0), Cursor(0))
    got = samples(families(t, current()))
    assert math.isinf(got[("outbox_relay_last_publish_age_seconds", ())])
    assert got[("outbox_oldest_unsent_age_seconds", (("priority", "high"),))] == 0
    # Without the database, the counters stay (they are the process's), the gauges go.
    names = {m.name for m in families(t, None)}
    assert "outbox_sent" in names
    assert "outbox_emails" not in names


def test_domain_checks_are_a_gauge_per_domain_and_check() -> None:
    checks = {("shop.example", "spf"): 0, ("shop.example", "dkim"): 2, ("news.example", "dmarc"): 1}
    got = samples(families(tally(), current(domain_checks=checks)))
    name = "outbox_domain_check"
    assert got[(name, (("check", "dkim"), ("domain", "shop.example")))] == 2
    assert got[(name, (("check", "dmarc"), ("domain", "news.example")))] == 1
    assert got[(name, (("check", "spf"), ("domain", "shop.example")))] == 0
    assert len([k for k in got if k[0] == name]) == 3
