"""The console's pages to look: the overview, the email list and search, one
email, the suppression list, the audit. Any signed-in user sees them; an
address appears only as its tag (see :mod:`outbox.web.console`)."""

from __future__ import annotations

import dataclasses
import email
import email.policy
import time
from collections.abc import Callable, Mapping
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlencode

from outbox.db.store import (
    connections,
    console_reads,
    console_sessions,
    lookups,
    sending,
    suppressions,
    webhook_rows,
)
from outbox.errors import InvalidRequest, OutboxError
from outbox.events.hook_target import shown_url
from outbox.message.compose import composer
from outbox.message.preview import PREVIEW_ID
from outbox.telemetry.tracing import trace_id_of
from outbox.web import console_query as q
from outbox.web.chart import sends_chart
from outbox.web.console import Answer, Asked, Console, Who, form_address
from outbox.web.console_auth import token_hash

MAX_SESSIONS = 200  # live sessions the audit page lists

# The rows of one page of the email list, and whether a next page may hold more.
Listed = tuple[list[dict[str, Any]], bool]


class Pages:
    def __init__(self, console: Console) -> None:
        self.console = console

    # -- GET and POST handlers -------------------------------------------------------

    def overview(self, who: Who, asked: Asked) -> Answer:
        with self.console.pool.connection() as conn:
            overview = console_reads.console_overview(conn)
            endpoints = webhook_rows.list_endpoints(conn)
        counts: dict[str, dict[str, int]] = {}
        for status, priority, n in overview["counts"]:
            counts.setdefault(status, {})[priority] = n
        unsent_total = sum(n for _, _, n in overview["counts"])
        sent_estimate = max(overview["rows_estimate"] - unsent_total, 0)
        chart = sends_chart(overview["sent_per_minute"], now_minute=int(time.time() // 60))
        return self.console.ok(
            "overview.html",
            who,
            counts=counts,
            sent_estimate=sent_estimate,
            oldest=overview["oldest_unsent"],
            chart=chart,
            sent_last_hour=sum(overview["sent_per_minute"].values()),
            bounces=overview["bounces_24h"],
            webhooks=[
                {**dataclasses.asdict(e), "url": shown_url(e.url)}
                for e in endpoints
                if e.state != "disabled"
            ],
        )

    def emails(self, who: Who, asked: Asked) -> Answer:
        """GET /emails: the list, filtered by the query."""
        return self._emails(who, asked.query)

    def email_search(self, who: Who, asked: Asked) -> Answer:
        """POST /emails: a search, posted so that no address is in a URL."""
        return self._emails(who, self._unsealed(asked.form))

    def email(self, who: Who, asked: Asked) -> Answer:
        """GET /emails/{outbox_id}."""
        return self.show_email(who, q.parse_id(asked.params["outbox_id"]), reveal=False)

    def suppressions(self, who: Who, asked: Asked) -> Answer:
        return self.show_suppressions(who, asked.query, found=None)

    def suppression_search(self, who: Who, asked: Asked) -> Answer:
        """POST /suppressions: whether one address is on the list."""
        address = form_address(asked.form.get("address", ""))
        with self.console.pool.connection() as conn:
            entry = suppressions.find_suppression(conn, address)
        found = {
            "tag": self.console.tag(address),
            "sealed": self.console.access.seal(address),
            "entry": entry,
        }
        return self.show_suppressions(who, {}, found=found)

    def audit(self, who: Who, asked: Asked) -> Answer:
        return self.show_audit(who, asked.query)

    # -- the pages, as actions show them too -------------------------------------------

    def show_email(self, who: Who, outbox_id: int, *, reveal: bool, notice: str = "") -> Answer:
        with self.console.pool.connection() as conn:
            row = console_reads.console_email(conn, outbox_id)
            if row is None:
                return self.console.not_found("No such email.")
            attempts = lookups.list_attempts(conn, outbox_id)
            events = lookups.list_events(conn, outbox_id)
            bounces = lookups.list_bounces(conn, outbox_id)
        message = self._message(row)
        address = row["recipient"]
        row["recipient"] = address if reveal else self.console.tag(address)
        trace_id = trace_id_of(row.pop("trace_context", None))
        row.pop("params")  # may hold personal data; the rendered message shows what was sent
        return self.console.ok(
            "email.html",
            who,
            row=row,
            timeline=_timeline(row, attempts, events, bounces),
            attempts=attempts,
            message=message,
            trace_id=trace_id,
            revealed=reveal,
            notice=notice,
            may_requeue=row["status"] in q.PARKED,
            clear=reveal,
        )

    def show_suppressions(
        self, who: Who, query: Mapping[str, str], *, found: Any, notice: str = ""
    ) -> Answer:
        before = None
        if query.get("before_at"):
            at = q.parse_time(query["before_at"], "before_at")
            sealed = self.console.access.unseal(query.get("before", ""))
            if at is None or sealed is None:
                raise InvalidRequest("this page of the list has expired")
            before = (at, sealed)
        with self.console.pool.connection() as conn:
            entries = console_reads.console_suppressions(conn, before=before, limit=q.PAGE)
        shown = [
            {
                "tag": self.console.tag(e.address),
                "sealed": self.console.access.seal(e.address),
                "scope": e.scope,
                "reason": e.reason,
                "detail": e.detail,
                "created_at": e.created_at,
            }
            for e in entries
        ]
        next_page = {}
        if len(entries) == q.PAGE:
            last = entries[-1]
            next_page = {"before_at": last.created_at.isoformat(), "before": shown[-1]["sealed"]}
        return self.console.ok(
            "suppressions.html",
            who,
            entries=shown,
            found=found,
            notice=notice,
            next_get=urlencode(next_page),
        )

    def show_audit(self, who: Who, query: Mapping[str, str], *, notice: str = "") -> Answer:
        before = q.parse_cursor(query.get("before", ""))
        with self.console.pool.connection() as conn:
            entries = console_sessions.console_audit_list(conn, before=before, limit=q.PAGE)
            sessions = console_sessions.console_session_list(conn, limit=MAX_SESSIONS)
        for s in sessions:
            s["yours"] = s.pop("token_hash") == token_hash(who.session)
        next_get = urlencode({"before": entries[-1]["id"]}) if len(entries) == q.PAGE else ""
        return self.console.ok(
            "audit.html",
            who,
            entries=entries,
            next_get=next_get,
            sessions=sessions,
            notice=notice,
        )

    def id_window(
        self, conn: connections.Conn, filters: q.Filters, before: int | None
    ) -> tuple[int, int | None]:
        """The ids a time filter covers, so the scan stays within them."""
        if filters.since is None and filters.until is None:
            return 0, before
        ends = console_reads.console_id_range(conn)
        if ends is None:
            return 0, before
        first, end = q.id_window(
            filters, *ends, lambda outbox_id: console_reads.console_created_at(conn, outbox_id)
        )
        if end is not None and (before is None or end < before):
            before = max(end, 1)
        return first, before

    # -- the email list -------------------------------------------------------------

    def _unsealed(self, form: Mapping[str, str]) -> dict[str, str]:
        """A next-page form carries an address search sealed; open it."""
        values = dict(form)
        sealed = values.pop("sealed_q", "")
        if sealed:
            opened = self.console.access.unseal(sealed)
            if opened is None:
                raise InvalidRequest("this page of results has expired: search again")
            values["q"] = opened
        return values

    def _emails(self, who: Who, form: Mapping[str, str]) -> Answer:
        search = q.parse_search(form)
        with self.console.pool.connection() as conn:
            rows, more = self._found(conn, search) if search.ref else self._listed(conn, search)
            templates = console_reads.console_templates(conn)
        for row in rows:
            row["recipient"] = self.console.tag(row["recipient"])
        next_page: dict[str, str] = {}
        if more and rows:
            next_page = {**search.filters.as_query(), "before": str(rows[-1]["id"])}
            if search.ref:
                next_page["sealed_q"] = self.console.access.seal(search.ref)
        return self.console.ok(
            "emails.html",
            who,
            rows=rows,
            search=search,
            filters=search.filters.as_query(),
            templates=templates,
            next_page=next_page,
            next_get="" if search.ref else urlencode(next_page),
            parked=search.filters.status in q.PARKED and not search.ref,
        )

    def _found(self, conn: connections.Conn, search: q.Search) -> Listed:
        """The emails one of its names finds (key, ids, Message-ID, address), filtered."""
        rows = console_reads.console_find(conn, search.ref) if search.before is None else []
        if search.address is not None:
            to = console_reads.console_find_to(
                conn, search.address, before=search.before, limit=q.PAGE
            )
            seen = {r["id"] for r in rows}
            rows += [r for r in to if r["id"] not in seen]
        rows = [r for r in rows if _matches(r, search.filters)]
        rows.sort(key=lambda r: r["id"], reverse=True)
        return rows, search.address is not None and len(rows) >= q.PAGE

    def _listed(self, conn: connections.Conn, search: q.Search) -> Listed:
        """One page of the emails the filters hold, newest first."""
        filters = console_reads.EmailFilter(**dataclasses.asdict(search.filters))
        first, before = self.id_window(conn, search.filters, search.before)
        rows = console_reads.console_emails(
            conn, filters, before=before, from_id=first, limit=q.PAGE
        )
        return rows, len(rows) == q.PAGE

    def _message(self, row: dict[str, Any]) -> dict[str, Any]:
        """The message as a worker composes it, without its links' tokens (row id 0)."""
        outbox_row = sending.OutboxRow(
            id=PREVIEW_ID,
            idempotency_key=row["idempotency_key"],
            recipient=row["recipient"],
            template=row["template"],
            params=row["params"],
            message_id=row["message_id"],
            priority=row["priority"],
            attempts=row["attempts"],
            created_at=row["created_at"],
            age_from=row["requeued_at"] or row["created_at"],
            template_version=row["template_version"],
            sender=row["sender"],
        )
        try:
            data = composer(self.console.settings).message(
                outbox_row, to=row["recipient"], connect=self.console.pool.connection
            )
        except OutboxError as exc:
            return {"error": str(exc)}
        parsed = email.message_from_bytes(data, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        html_part = parsed.get_body(("html",))
        text_part = parsed.get_body(("plain",))
        return {
            "headers": [(k, str(v)) for k, v in parsed.items() if k.lower() != "dkim-signature"],
            "html": html_part.get_content() if isinstance(html_part, EmailMessage) else None,
            "text": text_part.get_content() if isinstance(text_part, EmailMessage) else None,
            "size": len(data),
        }


def _matches(row: dict[str, Any], filters: q.Filters) -> bool:
    checks: list[Callable[[], bool]] = [
        lambda: filters.status is None or row["status"] == filters.status,
        lambda: filters.priority is None or row["priority"] == filters.priority,
        lambda: filters.template is None or row["template"] == filters.template,
        lambda: filters.tag is None or filters.tag in (row.get("tags") or ()),
        lambda: filters.since is None or row["created_at"] >= filters.since,
        lambda: filters.until is None or row["created_at"] < filters.until,
    ]
    return all(check() for check in checks)


def _timeline(
    row: dict[str, Any],
    attempts: list[dict[str, Any]],
    events: list[dict[str, Any]],
    bounces: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Creation, status changes, attempts and bounce reports, oldest first."""
    items: list[dict[str, Any]] = [
        {"at": row["created_at"], "kind": "enqueued", "text": "pending (enqueued)"}
    ]
    for e in events:
        items.append(
            {
                "at": e["at"],
                "kind": "status",
                "text": f"{e['from_status']} → {e['to_status']}",
                "detail": e["reason"] or "",
                "actor": e["actor"] or "",
            }
        )
    for a in attempts:
        text, enhanced = a["reply_text"] or "", a["enhanced_status"]
        shown = enhanced if enhanced and not text.startswith(enhanced) else None
        reply = " ".join(str(x) for x in (a["reply_code"], shown, text) if x)
        items.append(
            {
                "at": a["attempted_at"],
                "kind": "attempt",
                "text": f"attempt #{a['attempt']}: {a['verdict']} via {a['transport'] or '?'}",
                "detail": reply,
                "actor": a["worker"] or "",
            }
        )
    for b in bounces:
        verdicts = ", ".join(
            " ".join(filter(None, (r.get("class"), r.get("status"), r.get("reason"))))
            for r in b["results"]
        )
        items.append(
            {
                "at": b["received_at"],
                "kind": "bounce",
                "text": f"bounce report #{b['id']} from {b['source']} (linked by {b['link']})",
                "detail": verdicts or "no verdict",
            }
        )
    items.sort(key=lambda item: item["at"])
    return items
