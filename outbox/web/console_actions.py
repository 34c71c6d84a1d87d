"""The console's actions, for operators only: reveal an address, requeue an
email or a filtered set, suppress or unsuppress an address, end a session.
Each needs a reason and is written to ``console_audit`` in the action's own
transaction; the answer is the page it was taken from."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from http import HTTPStatus
from urllib.parse import urlencode

from outbox.db.store import console_reads, console_sessions, requeues, suppressions
from outbox.errors import InvalidRequest
from outbox.web import console_query as q
from outbox.web.console import PREFIX, Answer, Asked, Console, Who, form_address
from outbox.web.console_pages import Pages

MAX_SET = 10_000  # rows one filtered requeue may touch


class Actions:
    def __init__(self, console: Console, pages: Pages) -> None:
        self.console = console
        self.pages = pages

    def on_email(self, who: Who, asked: Asked) -> Answer:
        """POST /emails/{outbox_id}/{action}: reveal its address, or requeue it."""
        outbox_id = q.parse_id(asked.params["outbox_id"])
        refused = self.console.forbidden_unless_operator(who)
        if refused is not None:
            return refused
        action = asked.params["action"]
        if action == "reveal":
            return self._reveal(who, outbox_id, asked.form)
        if action == "requeue":
            return self._requeue(who, outbox_id, asked.form)
        return self.console.not_found("No such action.")

    def _reveal(self, who: Who, outbox_id: int, form: Mapping[str, str]) -> Answer:
        reason = q.reason_of(form)
        with self.console.pool.connection() as conn:
            row = console_reads.console_email(conn, outbox_id)
            if row is None:
                return self.console.not_found("No such email.")
            target = f"email {outbox_id} ({row['idempotency_key']})"
            self.console.audit_write(who.user, "reveal", target, reason, conn=conn)
        return self.pages.show_email(who, outbox_id, reveal=True)

    def _requeue(self, who: Who, outbox_id: int, form: Mapping[str, str]) -> Answer:
        reason = q.reason_of(form)
        with self.console.pool.connection() as conn:
            row = console_reads.console_email(conn, outbox_id)
            if row is None:
                return self.console.not_found("No such email.")
            target = f"email {outbox_id} ({row['idempotency_key']})"
            woken = requeues.requeue_row(conn, outbox_id) if row["status"] in q.PARKED else []
            detail = {"from_status": row["status"], "requeued": len(woken)}
            self.console.audit_write(who.user, "requeue", target, reason, conn=conn, detail=detail)
        notice = "Requeued: it is pending again." if woken else "Not requeued: it is not parked."
        return self.pages.show_email(who, outbox_id, reveal=False, notice=notice)

    def requeue_set(self, who: Who, asked: Asked) -> Answer:
        """POST /requeue: step one shows how many rows the filters hold; step two
        (confirm) requeues them."""
        refused = self.console.forbidden_unless_operator(who)
        if refused is not None:
            return refused
        form = asked.form
        filters = q.parse_filters(form)
        if filters.status not in q.PARKED:
            raise InvalidRequest("choose a status to requeue: failed, dead or held")
        chosen = console_reads.EmailFilter(**dataclasses.asdict(filters))
        with self.console.pool.connection() as conn:
            first, before = self.pages.id_window(conn, filters, None)
            rows = console_reads.console_emails(
                conn, chosen, before=before, from_id=first, limit=MAX_SET + 1
            )
            if form.get("confirm") != "yes":
                return self.console.ok(
                    "confirm.html",
                    who,
                    count=min(len(rows), MAX_SET),
                    capped=len(rows) > MAX_SET,
                    filters=filters.as_query(),
                    reason=form.get("reason", ""),
                )
            reason = q.reason_of(form)
            woken = 0
            for row in rows[:MAX_SET]:
                woken += len(requeues.requeue_row(conn, row["id"]))
            detail = {"filters": filters.as_query(), "matched": len(rows), "requeued": woken}
            self.console.audit_write(
                who.user, "requeue-set", _describe(filters), reason, conn=conn, detail=detail
            )
        location = f"{PREFIX}/emails?" + urlencode(filters.as_query())
        return Answer(HTTPStatus.SEE_OTHER, location=location)

    def revoke_session(self, who: Who, asked: Asked) -> Answer:
        """POST /sessions/{session_id}/revoke: its holder signs in again."""
        session_id = q.parse_id(asked.params["session_id"])
        refused = self.console.forbidden_unless_operator(who)
        if refused is not None:
            return refused
        reason = q.reason_of(asked.form)
        with self.console.pool.connection() as conn:
            ended = console_sessions.console_session_revoke_id(conn, session_id)
            if ended is not None:
                name, role = ended
                self.console.audit_write(
                    who.user, "session-revoke", f"session {session_id} ({name})", reason,
                    conn=conn, detail={"role": role},
                )  # fmt: skip
        notice = (
            f"Session {session_id} of {ended[0]} ended: they sign in again."
            if ended
            else f"Session {session_id} had ended already."
        )
        return self.pages.show_audit(who, {}, notice=notice)

    def suppression_change(self, who: Who, asked: Asked) -> Answer:
        """POST /suppressions/{action}: add an address to the list, or remove it."""
        refused = self.console.forbidden_unless_operator(who)
        if refused is not None:
            return refused
        action, form = asked.params["action"], asked.form
        if action not in ("add", "remove"):
            return self.console.not_found("No such action.")
        reason = q.reason_of(form)
        sealed = form.get("sealed", "")
        raw = self.console.access.unseal(sealed) if sealed else form.get("address", "")
        if raw is None:
            raise InvalidRequest("this form has expired: search for the address again")
        address = form_address(raw)
        tag = self.console.tag(address)
        with self.console.pool.connection() as conn:
            if action == "add":
                scope = form.get("scope", "all")
                if scope not in ("all", "bulk"):
                    raise InvalidRequest("scope must be all or bulk")
                changed = suppressions.suppress(
                    conn, address, reason="manual", scope=scope, detail=reason
                )
                notice = f"{tag} suppressed ({scope})." if changed else f"{tag} already suppressed."
            else:
                changed = suppressions.unsuppress(conn, address)
                notice = f"{tag} may get mail again." if changed else f"{tag} is not suppressed."
            self.console.audit_write(
                who.user, f"suppression-{action}", tag, reason, conn=conn,
                detail={"changed": changed},
            )  # fmt: skip
        return self.pages.show_suppressions(who, {}, found=None, notice=notice)


def _describe(filters: q.Filters) -> str:
    return ", ".join(f"{k}={v}" for k, v in filters.as_query().items())
