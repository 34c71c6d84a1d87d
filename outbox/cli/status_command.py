"""``outbox status``: rows per status and priority, and the health of every part.

It exits 1 when some part is down, 2 when Postgres cannot be reached: a probe's answer.
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

from outbox.cli.database import connect
from outbox.cli.output import JsonResult, Printer, Redaction, Result
from outbox.config import Settings
from outbox.db.store import connections, counts, domain_checks
from outbox.domain_auth.findings import finding_lines, worst
from outbox.errors import OutboxError, SchemaMissing
from outbox.telemetry.health import Health, gather


@dataclass(frozen=True, slots=True)
class Unreachable(JsonResult):
    """Postgres could not be reached: the health of the other parts, shown with it."""

    health: Health
    json_indent: ClassVar[int | None] = 2

    def json(self) -> Any:
        return {"health": self.health.as_dict()}

    def text(self) -> str:
        return health_text(self.health)

    def exit_code(self) -> int:
        return 2


@dataclass(frozen=True, slots=True)
class Status(JsonResult):
    counts: list[tuple[str, str, int]]
    tag: str | None
    oldest: dict[str, float]  # seconds, by priority
    paced: dict[str, int]  # rows waiting for a receiver's rate
    health: Health
    domains: list[domain_checks.StoredCheck] = field(default_factory=list)
    json_indent: ClassVar[int | None] = 2

    def json(self) -> Any:
        return {
            "counts": [{"status": s, "priority": p, "count": n} for s, p, n in self.counts],
            **({"tag": self.tag} if self.tag else {}),
            "oldest_unsent_seconds": self.oldest,
            "paced_pending": self.paced,
            "health": self.health.as_dict(),
            "domains": domains_json(self.domains),
        }

    def text(self) -> str:
        lines = [f"emails tagged {self.tag}:"] if self.tag else []
        if self.counts:
            lines.append(f"{'status':<10} {'priority':<8} {'count':>10}")
        else:
            lines.append("no email with that tag" if self.tag else "no email in the outbox yet")
        lines += [f"{s:<10} {p:<8} {n:>10}" for s, p, n in self.counts]
        lines += [f"oldest unsent {p}: {age:.1f}s" for p, age in sorted(self.oldest.items())]
        lines += [f"pending for {r}'s rate: {n}" for r, n in self.paced.items()]
        lines.append(health_text(self.health))
        lines += domains_text(self.domains)
        return "\n".join(lines)

    def exit_code(self) -> int:
        return 0 if self.health.ok else 1

    def redaction(self) -> Redaction:
        return Redaction.ADDRESSES if self.domains else Redaction.NONE  # a record's rua=


def status(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    try:
        conn = connect(settings)
    except OutboxError as exc:
        # Said on stderr as every command does, and shown with the other parts' health.
        out.note(f"outbox: {exc}")
        return Unreachable(gather(settings, None, str(exc)))
    with conn:
        counts, oldest, paced = _counts(conn, args.tag)
        health = gather(settings, conn)
        domains = _domains(conn)
    return Status(counts, args.tag, oldest, paced, health, domains)


def _domains(conn: connections.Conn) -> list[domain_checks.StoredCheck]:
    """The last check of each sending domain; none when it cannot be read."""
    try:
        return domain_checks.last_domain_checks(conn)
    except OutboxError:
        return []
    finally:
        with contextlib.suppress(OutboxError):
            connections.rollback(conn)


def _grouped(stored: list[domain_checks.StoredCheck]) -> dict[str, list[domain_checks.StoredCheck]]:
    grouped: dict[str, list[domain_checks.StoredCheck]] = {}
    for check in stored:
        grouped.setdefault(check.finding.domain, []).append(check)
    return grouped


def domains_json(stored: list[domain_checks.StoredCheck]) -> dict[str, Any]:
    return {
        domain: {
            "state": worst(c.finding for c in checks).word,
            "checked_at": checks[0].checked_at,
            "checks": {
                c.finding.check: {
                    "state": c.finding.state.word,
                    "found": c.finding.found,
                    "fix": c.finding.fix,
                }
                for c in checks
            },
        }
        for domain, checks in _grouped(stored).items()
    }


def domains_text(stored: list[domain_checks.StoredCheck]) -> list[str]:
    """A line per domain, and one per finding that is not ok with what to publish."""
    lines = []
    for domain, checks in _grouped(stored).items():
        hours = checks[0].seconds_ago / 3600
        state = worst(c.finding for c in checks).word
        lines.append(f"domain {domain}: {state} (checked {hours:.1f} h ago; `outbox domain check`)")
        lines += finding_lines((c.finding for c in checks), only_fixes=True)
    return lines


def _counts(
    conn: connections.Conn, tag: str | None
) -> tuple[list[tuple[str, str, int]], dict[str, float], dict[str, int]]:
    """The rows' figures; none when Postgres fails to give them (its health says why)."""
    try:
        by_status = counts.status_counts_by_tag(conn, tag) if tag else counts.status_counts(conn)
        return by_status, counts.oldest_unsent(conn), counts.paced_pending(conn)
    except SchemaMissing:
        raise  # said in one line, with what to do
    except OutboxError:
        with contextlib.suppress(OutboxError):
            connections.rollback(conn)  # the health checks need a usable connection
        return [], {}, {}


def health_text(health: Health) -> str:
    lines = ["health:"]
    pg = health.postgres
    if pg.get("up"):
        lines.append(f"  postgres   up ({pg['latency_ms']:.1f} ms)")
    else:
        lines.append(f"  postgres   DOWN: {pg.get('error', '')}")
    broker = health.broker
    if broker.get("up"):
        waiting = ", ".join(f"{q} {n}" for q, n in broker["messages"].items())
        lines.append(
            f"  broker     up ({broker['latency_ms']:.1f} ms; messages waiting: {waiting})"
        )
    else:
        lines.append(f"  broker     DOWN: {broker.get('error', '')}")
    sends = {s["transport"]: s for s in health.sends}
    lines += [_transport_line(t, sends.pop(t["transport"], None)) for t in health.transports]
    lines += [f"  transport  {name} up{_last_send(s)}" for name, s in sends.items()]
    if not health.transports and not health.sends and pg.get("up"):
        lines.append("  transport  no send seen yet")
    lines += [_process_line(p) for p in health.processes]
    return "\n".join(lines)


def _transport_line(t: dict[str, Any], send: dict[str, Any] | None) -> str:
    if t["state"] != "open":
        return f"  transport  {t['transport']} up{_last_send(send)}"
    return (
        f"  transport  {t['transport']} DOWN since {t['down_since']}"
        f" ({t['failures']} failures; last: {t['last_error']})"
    )


def _last_send(send: dict[str, Any] | None) -> str:
    """``(last sent 3.2s ago)``, from the transport's latest attempts; "" when none."""
    if send is None:
        return ""
    if send["last_sent_seconds_ago"] is None:
        return (
            f" (no send among its latest attempts; last attempt"
            f" {send['last_attempt_seconds_ago']:.1f}s ago: {send['last_verdict']})"
        )
    return f" (last sent {send['last_sent_seconds_ago']:.1f}s ago)"


def _process_line(proc: dict[str, Any]) -> str:
    state = "SILENT" if proc["silent"] else "alive"
    detail = proc["detail"] or {}
    what = ",".join(detail.get("queues") or detail.get("priorities") or [])
    pool = detail.get("pool")
    pool_text = (
        f"; pool {pool['pool_available']}/{pool['pool_size']} free,"
        f" {pool['requests_waiting']} waiting"
        if pool
        else ""
    )
    return (
        f"  {proc['kind']:<10} {proc['name']} {what} {state},"
        f" last beat {proc['last_beat_seconds_ago']:.1f}s ago{pool_text}"
    )
