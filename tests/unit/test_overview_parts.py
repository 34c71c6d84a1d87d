"""The overview's pure parts: the hourly chart, the health items, the rates."""

from __future__ import annotations

import re

from outbox.telemetry.health import Health
from outbox.web.chart import HEIGHT, hourly_chart
from outbox.web.console_overview import HealthItem, health_items, rates


def test_hourly_bars_stack_sent_failed_and_bounced_newest_right() -> None:
    svg = hourly_chart(
        {100: {"sent": 6, "failed": 2, "bounced": 2}, 99: {"sent": 5}, 70: {"sent": 99}},
        now_hour=100,
    )
    assert "99 sent" not in svg  # older than the last 24 hours
    rects = re.findall(r'<rect x="([0-9.]+)" y="([0-9.]+)" width="[0-9.]+" height="([0-9.]+)" '
                       r'fill="(#[0-9a-f]+)"><title>(\d+) (\w+), (\d+) h ago', svg)  # fmt: skip
    assert [(r[4], r[5], r[6]) for r in rects] == [
        ("5", "sent", "1"), ("6", "sent", "0"), ("2", "failed", "0"), ("2", "bounced", "0")
    ]  # fmt: skip
    newest = [r for r in rects if r[6] == "0"]
    assert len({r[0] for r in newest}) == 1  # one column
    # Stacked from the bottom, the busiest hour at full height (less the margin).
    tops = [float(r[1]) for r in newest]
    assert tops == sorted(tops, reverse=True)
    assert round(sum(float(r[2]) for r in newest), 1) == HEIGHT - 10
    assert 'aria-label="last 24 hours: 11 sent, 2 failed, 2 bounced"' in svg
    assert hourly_chart({}, now_hour=5).count("<rect") == 0


def test_health_items_say_each_part_as_outbox_status_does() -> None:
    health = Health(
        postgres={"up": True, "latency_ms": 1.0},
        broker={"up": False, "error": "connection refused"},
        transports=[
            {
                "transport": "smtp",
                "state": "open",
                "failures": 5,
                "down_since": "2026-12-05",
                "last_error": "421 at connect",
                "changed_seconds_ago": 3.0,
            },
        ],
        sends=[
            {
                "transport": "smtp",
                "last_attempt_seconds_ago": 1.0,
                "last_sent_seconds_ago": 9.0,
                "last_verdict": "retry",
            },
            {
                "transport": "resend",
                "last_attempt_seconds_ago": 2.0,
                "last_sent_seconds_ago": 2.0,
                "last_verdict": "sent",
            },
        ],
        processes=[
            {
                "name": "w1",
                "kind": "worker",
                "detail": {},
                "last_beat_seconds_ago": 1.0,
                "silent": False,
            },
            {
                "name": "r1",
                "kind": "relay",
                "detail": {},
                "last_beat_seconds_ago": 99.0,
                "silent": True,
            },
        ],
    )
    items = health_items(health)
    assert [(i.part, i.ok) for i in items] == [
        ("postgres", True), ("broker", False), ("transport smtp", False),
        ("transport resend", True), ("worker w1", True), ("relay r1", False),
    ]  # fmt: skip
    assert "DOWN since 2026-12-05 (5 failures; last: 421 at connect)" in items[2].text
    assert items[3] == HealthItem("transport resend", True, "up; last sent 2.0 s ago")
    assert health_items(Health(postgres={"up": True, "latency_ms": 1.0}, broker={"up": True}))[
        -1
    ] == HealthItem("transport", True, "no send seen yet")


def test_rates_say_their_share_of_the_sent() -> None:
    bounces, complaints = rates({"hard": 3, "complaint": 1}, 200)
    assert (bounces.percent, bounces.state) == ("1.50 %", "ok")
    assert (complaints.percent, complaints.state) == ("0.50 %", "over")
    assert rates({}, 0)[0].percent == "no send yet"
