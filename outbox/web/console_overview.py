"""The console's overview: is anything wrong, and how much went where.

Counts of the live outbox are exact; the settled history (sent, cancelled) is
exact while the table is small and otherwise the planner's estimate, labelled
so. The health of each part is what ``outbox status`` reports
(:func:`outbox.telemetry.health.gather`); the feedback rates are measured
against the lines mailbox providers draw. Each part of the health card is one
:class:`HealthItem` made by :func:`health_items`: a new part adds its item there.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from outbox.db.store import console_reads, domain_checks, overview_reads, webhook_rows
from outbox.events.hook_target import shown_url
from outbox.telemetry.health import Health, gather
from outbox.web import console_query as q
from outbox.web.chart import hourly_chart, sends_chart
from outbox.web.console import Console

# Mailbox providers' lines (Gmail's and Yahoo's sender rules): hard bounces under
# 2 % of the mail sent; complaints under 0.1 %, never 0.3 %.
BOUNCE_LINE = 0.02
COMPLAINT_WARN, COMPLAINT_LINE = 0.001, 0.003
# The statuses the overview lists, in order: the console's own, scheduled apart.
ROWS = ("scheduled", *q.STATUSES)
MAX_SERIES = 12  # templates, and tags, with a chart each: the busiest


@dataclass(frozen=True, slots=True)
class HealthItem:
    part: str  # "postgres", "broker", "transport smtp", "worker w1"...
    ok: bool
    text: str


@dataclass(frozen=True, slots=True)
class Rate:
    name: str
    count: int
    sent: int
    state: str  # ok, warn, over
    line: str  # what it is measured against

    @property
    def percent(self) -> str:
        return f"{self.count / self.sent * 100:.2f} %" if self.sent else "no send yet"


def overview_values(console: Console) -> dict[str, Any]:
    """Everything overview.html shows."""
    with console.pool.connection() as conn:
        statuses = overview_reads.status_counts(conn)
        recent = console_reads.console_overview(conn)
        feedback, sent_24h = overview_reads.feedback_24h(conn)
        hourly = overview_reads.hourly(conn)
        health = gather(console.settings, conn)
        domains = domain_checks.last_domain_checks(conn)
        endpoints = webhook_rows.list_endpoints(conn)
    now_hour = int(time.time() // 3600)
    return {
        "counts": statuses.counts,
        "settled_exact": statuses.settled_exact,
        "estimates": statuses.estimates,
        "rows": ROWS,
        "oldest": recent["oldest_unsent"],
        "chart": sends_chart(recent["sent_per_minute"], now_minute=int(time.time() // 60)),
        "sent_last_hour": sum(recent["sent_per_minute"].values()),
        "feedback": feedback,
        "sent_24h": sent_24h,
        "rates": rates(feedback, sent_24h),
        "health": health_items(health),
        "health_ok": health.ok,
        "day_chart": hourly_chart(_per_hour(hourly, lambda h: True), now_hour=now_hour),
        "by_template": _series(hourly, now_hour, lambda h: [h.template]),
        "by_tag": _series(hourly, now_hour, lambda h: h.tags),
        "domain_checks": domains,
        "webhooks": [
            {**dataclasses.asdict(e), "url": shown_url(e.url)}
            for e in endpoints
            if e.state != "disabled"
        ],
    }


def rates(feedback: dict[str, int], sent: int) -> list[Rate]:
    """Hard bounces and complaints of the last 24 hours against the providers' lines."""
    hard, complaints = feedback.get("hard", 0), feedback.get("complaint", 0)
    return [
        Rate("hard bounces", hard, sent, _state(hard, sent, BOUNCE_LINE, BOUNCE_LINE), "under 2 %"),
        Rate(
            "complaints",
            complaints,
            sent,
            _state(complaints, sent, COMPLAINT_WARN, COMPLAINT_LINE),
            "under 0.1 %, never 0.3 %",
        ),
    ]


def _state(count: int, sent: int, warn: float, line: float) -> str:
    if not sent:
        return "ok" if not count else "over"
    share = count / sent
    if share >= line:
        return "over"
    return "warn" if share >= warn else "ok"


def health_items(health: Health) -> list[HealthItem]:
    """One item per part, as ``outbox status`` reports it."""
    items = [_up("postgres", health.postgres), _up("broker", health.broker)]
    sends = {s["transport"]: s for s in health.sends}
    for t in health.transports:
        send = sends.pop(t["transport"], None)
        if t["state"] == "open":
            text = (
                f"DOWN since {t['down_since']} ({t['failures']} failures; last: {t['last_error']})"
            )
            items.append(HealthItem(f"transport {t['transport']}", False, text))
        else:
            items.append(HealthItem(f"transport {t['transport']}", True, _sent_text(send)))
    items += [HealthItem(f"transport {name}", True, _sent_text(s)) for name, s in sends.items()]
    if not health.transports and not health.sends:
        items.append(HealthItem("transport", True, "no send seen yet"))
    for p in health.processes:
        state = "SILENT" if p["silent"] else "alive"
        text = f"{state}, last beat {p['last_beat_seconds_ago']:.1f} s ago"
        items.append(HealthItem(f"{p['kind']} {p['name']}", not p["silent"], text))
    return items


def _up(part: str, found: dict[str, Any]) -> HealthItem:
    if found.get("up"):
        return HealthItem(part, True, f"up ({found.get('latency_ms', 0):.1f} ms)")
    return HealthItem(part, False, f"DOWN: {found.get('error', '')}")


def _sent_text(send: dict[str, Any] | None) -> str:
    if send is None:
        return "up (breaker closed)"
    if send["last_sent_seconds_ago"] is None:
        return (
            f"up; last attempt {send['last_attempt_seconds_ago']:.1f} s ago: {send['last_verdict']}"
        )
    return f"up; last sent {send['last_sent_seconds_ago']:.1f} s ago"


def _per_hour(hourly: Iterable[overview_reads.Hourly], keep: Any) -> dict[int, dict[str, int]]:
    per: dict[int, dict[str, int]] = {}
    for h in hourly:
        if keep(h):
            kinds = per.setdefault(h.hour, {})
            kinds[h.kind] = kinds.get(h.kind, 0) + h.count
    return per


def _series(
    hourly: list[overview_reads.Hourly], now_hour: int, names_of: Any
) -> list[dict[str, Any]]:
    """Per name (a template, or a tag): its totals and its chart, the busiest first."""
    totals: dict[str, dict[str, int]] = {}
    for h in hourly:
        for name in names_of(h):
            kinds = totals.setdefault(name, {})
            kinds[h.kind] = kinds.get(h.kind, 0) + h.count
    busiest = sorted(totals, key=lambda n: (-sum(totals[n].values()), n))[:MAX_SERIES]
    return [
        {
            "name": name,
            "totals": totals[name],
            "chart": hourly_chart(
                _per_hour(hourly, lambda h, n=name: n in names_of(h)),
                now_hour=now_hour,
                height=40,
            ),
        }
        for name in busiest
    ]
