"""The console's pages to look: the overview, the email list and search, one
email, the suppression list, the audit. Any signed-in user sees them; an
address appears only as its tag (see :mod:`outbox.web.console`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from outbox.db.store import (
    connections,
    console_reads,
    console_sessions,
    lookups,
    suppressions,
)
from outbox.errors import InvalidRequest
from outbox.telemetry.tracing import trace_id_of
from outbox.web import console_email
from outbox.web import console_query as q
from outbox.web.console import Answer, Asked, Console, Who, form_address
from outbox.web.console_auth import token_hash
from outbox.web.console_overview import overview_values

MAX_SESSIONS = 200  # live sessions the audit page lists

# The rows of one page of the email list, and whether a next page may hold more.
Listed = tuple[list[dict[str, Any]], bool]


class Pages:
    def __init__(self, console: Console) -> None:
        self.console = console

    # -- GET and POST handlers -------------------------------------------------------

    def overview(self, who: Who, asked: Asked) -> Answer:
        return self.console.ok("overview.html", who, **overview_values(self.console))

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
        message = console_email.message(self.console, row)
        if not reveal:
            row["idempotency_key"] = console_email.key_shown(self.console, row)
            row["recipient"] = self.console.tag(row["recipient"])
        trace_id = trace_id_of(row.pop("trace_context", None))
        row.pop("params")  # may hold personal data; the rendered message shows what was sent
        for a in attempts:
            a["label"] = console_email.attempt_label(a)
            a["reply"] = console_email.reply_text(a)
        return self.console.ok(
            "email.html",
            who,
            row=row,
            more=console_email.details(self.console, row),
            timeline=console_email.timeline(row, attempts, events, bounces),
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
            row["idempotency_key"] = console_email.key_shown(self.console, row)
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
