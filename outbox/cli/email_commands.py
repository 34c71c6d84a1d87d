"""One email or a set of them: ``outbox show``, ``outbox requeue``, ``outbox cancel``."""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import sys
from dataclasses import dataclass
from typing import Any

from outbox import cancelling
from outbox.cli.database import connect
from outbox.cli.input import REQUEUEABLE, RequeueFilter, email_ref, requeue_filter
from outbox.cli.output import (
    JsonLines,
    JsonResult,
    Printer,
    Redaction,
    Refused,
    Result,
    Said,
    timestamp,
)
from outbox.config import Settings
from outbox.db.store import connections, lookups, requeues
from outbox.errors import OutboxError
from outbox.redact import known_addresses, recipient_tag
from outbox.telemetry.tracing import trace_id_of


@dataclass(frozen=True, slots=True)
class Email:
    """An email's row with its attempts, status changes and bounce reports."""

    row: dict[str, Any]
    attempts: list[dict[str, Any]]
    events: list[dict[str, Any]]
    bounces: list[dict[str, Any]]

    def json(self) -> dict[str, Any]:
        return {
            "email": self.row,
            "attempts": self.attempts,
            "events": self.events,
            "bounces": self.bounces,
        }

    def text(self) -> str:
        lines = [f"{name:>20}: {_value_text(value)}" for name, value in self.row.items()]
        lines.append("attempts:" if self.attempts else "attempts: none yet")
        for a in self.attempts:
            lines += _attempt_lines(a)
        lines.append("status changes:")
        lines.append(f"  {timestamp(self.row['created_at'])} -> pending (enqueued)")
        lines += [
            f"  {timestamp(e['at'])} {e['from_status']} -> {e['to_status']} ({e['reason']})"
            for e in self.events
        ]
        if self.bounces:
            lines.append("bounce reports:")
        lines += [_bounce_line(b) for b in self.bounces]
        return "\n".join(lines)


def _value_text(value: Any) -> str:
    """A field on one line: lists joined (each address apart, so it is tagged as
    the attempts' lines tag it), headers as ``Name: value``, files by name, JSON
    as JSON."""
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return timestamp(value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, list):
        return "; ".join(_item_text(v) for v in value) if value else ""
    return str(value)


def _item_text(item: Any) -> str:
    if isinstance(item, list):  # a header: [name, value]
        return ": ".join(str(part) for part in item)
    if isinstance(item, dict):  # a file stored with the email
        return f"{item.get('filename')} ({item.get('content_type')}, {item.get('size')} bytes)"
    return str(item)


def _attempt_lines(a: dict[str, Any]) -> list[str]:
    # Numbered across requeues; a requeue restarts the try count of the budget.
    tried = f" (try {a['attempt']} after a requeue)" if a["attempt"] != a["number"] else ""
    lines = [
        f"  #{a['number']}{tried} {timestamp(a['attempted_at'])} {a['verdict']:<9} "
        f"via {a['transport'] or '?'} {a['reply_code'] or '-'} "
        f"{a['enhanced_status'] or ''} {a['reply_text'] or ''}"
    ]
    lines += [
        f"     {r['kind']:<3} {r['address']}: {r['code'] or '-'} {r['text'] or ''}"
        for r in a.get("recipients") or []
    ]
    return lines


def _bounce_line(b: dict[str, Any]) -> str:
    verdicts = ", ".join(
        " ".join(filter(None, (r.get("class"), r.get("status"), r.get("reason"))))
        for r in b["results"]
    )
    return (
        f"  #{b['id']} {timestamp(b['received_at'])} {b['source']} "
        f"linked by {b['link']}: {verdicts or 'no verdict'}"
    )


@dataclass(frozen=True, slots=True)
class Emails(JsonResult):
    """``outbox show``: blocks apart by a blank line, or one JSON object a line."""

    emails: list[Email]
    reveal: bool

    def json(self) -> Any:
        return JsonLines([e.json() for e in self.emails])

    def text(self) -> str:
        return "\n\n".join(e.text() for e in self.emails)

    def redaction(self) -> Redaction:
        # Reply texts and reasons quote addresses: tagged unless --reveal; secrets never.
        return Redaction.SECRETS if self.reveal else Redaction.ADDRESSES


def show(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    with connect(settings) as conn:
        if args.to is not None:
            # Read from stdin with "-", so the address is not even in the shell history.
            address = sys.stdin.readline().strip() if args.to == "-" else args.to.strip()
            rows = lookups.find_messages_to(conn, address)
            if not rows:
                return Refused(f"no email to {recipient_tag(address, secret=settings.secret)}")
        else:
            rows = lookups.find_messages(conn, email_ref(args.ref))
            if not rows:
                return Refused(f"no email with key, Message-ID, id or provider id {args.ref!r}")
        emails = [_email(conn, row, settings, reveal=args.reveal) for row in rows]
    return Emails(emails, reveal=args.reveal)


def _email(
    conn: connections.Conn, row: dict[str, Any], settings: Settings, *, reveal: bool
) -> Email:
    outbox_id = row["id"]
    if not reveal:
        # The key keeps its own words: only the email's addresses in it are tagged.
        known = [
            row["recipient"],
            *(row["cc"] or ()),
            *(row["bcc"] or ()),
            *(row["reply_to"] or ()),
        ]
        row["idempotency_key"] = known_addresses(
            row["idempotency_key"], known, secret=settings.secret
        )
        row["recipient"] = recipient_tag(row["recipient"], secret=settings.secret)
    # Search Jaeger by this id, or by the tag email.message_id / outbox.idempotency_key.
    row["trace_id"] = trace_id_of(row.pop("trace_context", None))
    row.pop("params")  # may hold personal data; `outbox show` is for operators' logs too
    return Email(
        row,
        lookups.list_attempts(conn, outbox_id),
        lookups.list_events(conn, outbox_id),
        lookups.list_bounces(conn, outbox_id),
    )


@dataclass(frozen=True, slots=True)
class RequeuedOne(JsonResult):
    count: int  # rows the reference named
    dry_run: bool

    def json(self) -> Any:
        return {"requeued": self.count, "dry_run": self.dry_run}

    def text(self) -> str:
        return f"{'would requeue' if self.dry_run else 'requeued'} 1 email"


@dataclass(frozen=True, slots=True)
class WouldRequeue(JsonResult):
    """What a filter selects: with --dry-run, or when it selects nothing."""

    counts: list[tuple[str, str, int]]  # (status, priority, count)
    dry_run: bool

    def json(self) -> Any:
        found = [{"status": s, "priority": p, "count": n} for s, p, n in self.counts]
        return {"would_requeue": found, "dry_run": self.dry_run}

    def text(self) -> str:
        if not sum(n for _, _, n in self.counts):
            return "no email matches: nothing to requeue"
        return "\n".join(f"would requeue {n} {s} {p} emails" for s, p, n in self.counts)


@dataclass(frozen=True, slots=True)
class Requeued(JsonResult):
    woken: dict[str, int]  # rows requeued, by priority

    def json(self) -> Any:
        return {"requeued": self.woken, "dry_run": False}

    def text(self) -> str:
        done = sum(self.woken.values())
        if not done:
            return "no email matches: nothing to requeue"
        per = ", ".join(f"{n} {p}" for p, n in sorted(self.woken.items()))
        return f"requeued {done} emails ({per})"


def requeue(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    chosen = args.failed or args.dead or args.held
    if args.ref and (chosen or args.template or args.since or args.to_domain):
        raise OutboxError("name one email, or choose with --failed/--dead/--held and filters")
    if args.ref:
        return _requeue_one(settings, args.ref, dry_run=args.dry_run)
    selected = requeue_filter(
        failed=args.failed,
        dead=args.dead,
        held=args.held,
        template=args.template,
        since=args.since,
        to_domain=args.to_domain,
        now=dt.datetime.now(dt.UTC),
    )
    return _requeue_selected(settings, selected, dry_run=args.dry_run, batch=args.batch, out=out)


def _requeue_one(settings: Settings, ref: str, *, dry_run: bool) -> Result:
    with connect(settings) as conn:
        if dry_run:
            rows = lookups.find_messages(conn, email_ref(ref))
            connections.rollback(conn)
            count = sum(1 for r in rows if r["status"] in REQUEUEABLE)
        else:
            count = len(requeues.requeue(conn, email_ref(ref)))
            connections.commit(conn)
    if not count:
        return Refused(f"no failed, dead or held email with key, Message-ID or id {ref!r}")
    return RequeuedOne(count, dry_run)


def _requeue_selected(
    settings: Settings, selected: RequeueFilter, *, dry_run: bool, batch: int, out: Printer
) -> Result:
    with connect(settings) as conn:
        counts = requeues.requeue_count(conn, selected.params())
        connections.rollback(conn)
        total = sum(n for _, _, n in counts)
        if dry_run or not total:
            return WouldRequeue(counts, dry_run)

        def progress(done: int) -> None:
            out.progress(f"requeued {done}/{total}")

        woken = requeues.requeue_matching(
            conn,
            selected.params(),
            batch=max(1, batch),
            # Said only when it takes more than one batch.
            on_batch=progress if total > batch else None,
        )
    return Requeued(woken)


def cancel(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    """Exit 0 when cancelled now, 1 when the email is past cancelling or unknown."""
    by = args.by or f"cli:{getpass.getuser()}"
    with connect(settings) as conn:
        done = cancelling.cancel(conn, args.key, reason=args.reason, by=by)
        connections.commit(conn)
    if done.status is None:
        return Refused(f"no email with key {args.key!r}")
    if not done.cancelled:
        return Refused(f"not cancelled: the email is {done.status}")
    return Said(f"cancelled email {done.id}")
