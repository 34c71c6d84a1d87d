"""``/console``: support and operators look at the outbox instead of typing SQL.

Server-rendered pages (Jinja2 templates in ``pages/``, inline CSS, no script,
nothing loaded from elsewhere). Every page passes through the address
redactor before it leaves: a recipient appears only as its tag, whatever
field or reply text held it, except on the one answer to an operator's
audited "reveal". Every POST carries the session's CSRF token; every action
(and every sign-in) is written to ``console_audit``. Actions go through the
same store functions as the ``outbox`` command. Sessions signed in by
password are held in ``console_session`` (:mod:`outbox.web.console_auth`):
the audit page lists the live ones, and an operator may end one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import email
import email.policy
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import EmailMessage
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2

from outbox import redact
from outbox.config import Settings
from outbox.db import store
from outbox.errors import InvalidAddress, InvalidRequest, OutboxError, StoreError
from outbox.message.compose import composer
from outbox.message.preview import PREVIEW_ID
from outbox.telemetry.tracing import trace_id_of
from outbox.validate import normalize_address
from outbox.web import console_query as q
from outbox.web.chart import sends_chart
from outbox.web.console_auth import Access, Role, Session, SignInLimiter, User, token_hash

log = logging.getLogger(__name__)

PREFIX = "/console"
MAX_SET = 10_000  # rows one filtered requeue may touch
MAX_SESSIONS = 200  # live sessions the audit page lists
_PAGES = Path(__file__).with_name("pages")
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)


@dataclass(frozen=True, slots=True)
class Asked:
    """One request, as the console needs it (parsed by the ASGI layer)."""

    method: str
    path: str  # below /console: "/", "/emails/42"
    query: Mapping[str, str] = field(default_factory=dict)
    form: Mapping[str, str] = field(default_factory=dict)
    cookie: str | None = None
    client: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Answer:
    status: HTTPStatus
    body: str = ""
    location: str | None = None
    cookie: str | None = None  # a Set-Cookie value


@dataclass(frozen=True, slots=True)
class Who:
    user: User
    session: Session
    new_cookie: bool  # a session made on this request (single sign-on)


class Console:
    def __init__(self, settings: Settings, pool: store.Pool) -> None:
        self.settings = settings
        self.pool = pool
        self.access = Access.from_settings(settings)
        self.limiter = SignInLimiter()
        self._limiter_lock = threading.Lock()
        self.redactor = redact.Redactor.from_settings(settings)
        self.pages = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_PAGES),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.pages.globals.update(
            prefix=PREFIX,
            statuses=q.STATUSES,
            priorities=q.PRIORITIES,
            grafana_url=settings.grafana_url,
            jaeger_url=settings.jaeger_url.rstrip("/"),
        )

    # -- routing ---------------------------------------------------------------

    def handle(self, asked: Asked) -> Answer:
        try:
            return self._route(asked)
        except InvalidRequest as exc:
            return Answer(HTTPStatus.BAD_REQUEST, self._bare("Not understood", str(exc)))
        except StoreError:
            log.exception("console page %s failed", asked.path)
            return Answer(
                HTTPStatus.SERVICE_UNAVAILABLE, self._bare("Try again", "The database failed.")
            )

    def _route(self, asked: Asked) -> Answer:
        path = asked.path.rstrip("/") or "/"
        if path == "/login":
            return self._login(asked)
        who = self._who(asked)
        if who is None:
            if asked.method == "POST":
                return Answer(HTTPStatus.FORBIDDEN, self._bare("Sign in", "Sign in first."))
            return Answer(HTTPStatus.SEE_OTHER, location=f"{PREFIX}/login")
        if asked.method == "POST" and not self.access.csrf_ok(
            who.session, asked.form.get("csrf", "")
        ):
            return Answer(
                HTTPStatus.FORBIDDEN,
                self._bare("Refused", "This form is out of date or not ours: reload the page."),
            )
        answer = self._page(who, asked, path)
        if who.new_cookie:
            answer.cookie = self._set_cookie(who.session)
        return answer

    def _page(self, who: Who, asked: Asked, path: str) -> Answer:
        get, post = asked.method == "GET", asked.method == "POST"
        parts = path.strip("/").split("/")
        if path == "/" and get:
            return self._overview(who)
        if path == "/logout" and post:
            return self._logout(who)
        if parts[0] == "emails" and len(parts) == 1:
            if get:
                return self._emails(who, asked.query)
            if post:
                return self._emails(who, self._unsealed(asked.form))
        if parts[0] == "emails" and len(parts) == 2 and get:
            return self._email(who, q.parse_id(parts[1]), reveal=False)
        if parts[0] == "emails" and len(parts) == 3 and post:
            return self._act_on_email(who, q.parse_id(parts[1]), parts[2], asked.form)
        if path == "/requeue" and post:
            return self._requeue_set(who, asked.form)
        if path == "/suppressions":
            if get:
                return self._suppressions(who, asked.query, found=None)
            if post:
                return self._suppression_search(who, asked.form)
        if parts[0] == "suppressions" and len(parts) == 2 and post:
            return self._suppression_change(who, parts[1], asked.form)
        if path == "/audit" and get:
            return self._audit(who, asked.query)
        if parts[0] == "sessions" and len(parts) == 3 and parts[2] == "revoke" and post:
            return self._revoke_session(who, q.parse_id(parts[1]), asked.form)
        return Answer(HTTPStatus.NOT_FOUND, self._bare("Not found", "No such page."))

    # -- who is asking -----------------------------------------------------------

    def _who(self, asked: Asked) -> Who | None:
        proxied = self.access.from_proxy(asked.client, dict(asked.headers))
        session = self.access.session(asked.cookie)
        if proxied is not None:
            # The trusted proxy is the session: it names the user on every
            # request, and no row is kept; the cookie carries the CSRF nonce.
            if session is not None and session.user == proxied.name:
                return Who(proxied, session, new_cookie=False)
            return Who(proxied, self.access.new_session(proxied.name), new_cookie=True)
        if session is None or not session.user:
            return None
        hashed = token_hash(session)
        with self.pool.connection() as conn:
            held = store.console_session_find(conn, hashed)
            if held is None:  # signed out, revoked, expired, or from before sessions were held
                return None
            user = self.access.holder(session, user_name=held.user_name, role=held.role)
            if user is None:  # removed from the list, or given another role: sign in again
                store.console_session_revoke(conn, hashed)
                return None
        return Who(user, session, new_cookie=False)

    def _login(self, asked: Asked) -> Answer:
        session = self.access.session(asked.cookie)
        if asked.method == "GET" or session is None:
            # Sign-in has its own anonymous session, so its form carries a CSRF token too.
            fresh = session if session is not None else self.access.new_session("")
            body = self._render(
                "login.html", None, fresh, error="" if asked.method == "GET" else "Try again."
            )
            status = HTTPStatus.OK if asked.method == "GET" else HTTPStatus.FORBIDDEN
            return Answer(status, body, cookie=self._set_cookie(fresh))
        if asked.method != "POST":
            return Answer(HTTPStatus.METHOD_NOT_ALLOWED, self._bare("Not allowed", "GET or POST"))
        if not self.access.csrf_ok(session, asked.form.get("csrf", "")):
            return Answer(
                HTTPStatus.FORBIDDEN, self._bare("Refused", "Reload the sign-in page and retry.")
            )
        name = asked.form.get("name", "").strip()
        # Per name only: behind a proxy every client has the proxy's address, and
        # a limit per address would let anyone lock everyone out.
        keys = (f"name:{name}",)
        with self._limiter_lock:
            allowed = self.limiter.allowed(keys)
        if not allowed:
            body = self._render(
                "login.html", None, session, error="Too many failed sign-ins: try again later."
            )
            return Answer(HTTPStatus.TOO_MANY_REQUESTS, body)
        user = self.access.sign_in(name, asked.form.get("password", ""))
        if user is None:
            with self._limiter_lock:
                self.limiter.failed(keys)
            log.info("console sign-in refused")  # the name may be a password typed in the wrong box
            body = self._render("login.html", None, session, error="Wrong name or password.")
            return Answer(HTTPStatus.UNAUTHORIZED, body)
        signed_in = self.access.new_session(user.name)
        with self.pool.connection() as conn:
            # Expired sessions go here, a bounded batch at a time: every session
            # is made by a sign-in, so the deletes keep up with the inserts.
            store.console_session_purge(conn)
            store.console_session_add(
                conn,
                token_hash=token_hash(signed_in),
                user_name=user.name,
                role=str(user.role),
                expires_at=self.access.expires_at(signed_in),
            )
            self._audit_write(user, "sign-in", None, "password", conn=conn)
        return Answer(
            HTTPStatus.SEE_OTHER, location=f"{PREFIX}/", cookie=self._set_cookie(signed_in)
        )

    def _logout(self, who: Who) -> Answer:
        with self.pool.connection() as conn:
            # Ended here, not only in this browser: a copy of the cookie is refused too.
            store.console_session_revoke(conn, token_hash(who.session))
            self._audit_write(who.user, "sign-out", None, "signed out", conn=conn)
        expired = f"{self.access.cookie_name}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict"
        if self.access.secure:
            expired += "; Secure"
        return Answer(HTTPStatus.SEE_OTHER, location=f"{PREFIX}/login", cookie=expired)

    def _set_cookie(self, session: Session) -> str:
        value = (
            f"{self.access.cookie_name}={self.access.cookie(session)}; Path=/; HttpOnly; "
            f"SameSite=Strict; Max-Age={self.access.session_seconds}"
        )
        return value + "; Secure" if self.access.secure else value

    # -- pages -------------------------------------------------------------------

    def _overview(self, who: Who) -> Answer:
        with self.pool.connection() as conn:
            overview = store.console_overview(conn)
        counts: dict[str, dict[str, int]] = {}
        for status, priority, n in overview["counts"]:
            counts.setdefault(status, {})[priority] = n
        unsent_total = sum(n for _, _, n in overview["counts"])
        sent_estimate = max(overview["rows_estimate"] - unsent_total, 0)
        chart = sends_chart(overview["sent_per_minute"], now_minute=int(time.time() // 60))
        body = self._render(
            "overview.html",
            who,
            who.session,
            counts=counts,
            sent_estimate=sent_estimate,
            oldest=overview["oldest_unsent"],
            chart=chart,
            sent_last_hour=sum(overview["sent_per_minute"].values()),
            bounces=overview["bounces_24h"],
        )
        return Answer(HTTPStatus.OK, body)

    def _unsealed(self, form: Mapping[str, str]) -> dict[str, str]:
        """A next-page form carries an address search sealed; open it."""
        values = dict(form)
        sealed = values.pop("sealed_q", "")
        if sealed:
            opened = self.access.unseal(sealed)
            if opened is None:
                raise InvalidRequest("this page of results has expired: search again")
            values["q"] = opened
        return values

    def _emails(self, who: Who, form: Mapping[str, str]) -> Answer:
        search = q.parse_search(form)
        filters = store.EmailFilter(**dataclasses.asdict(search.filters))
        with self.pool.connection() as conn:
            if search.ref:
                rows = store.console_find(conn, search.ref) if search.before is None else []
                if search.address is not None:
                    to = store.console_find_to(
                        conn, search.address, before=search.before, limit=q.PAGE
                    )
                    seen = {r["id"] for r in rows}
                    rows += [r for r in to if r["id"] not in seen]
                rows = [r for r in rows if _matches(r, search.filters)]
                rows.sort(key=lambda r: r["id"], reverse=True)
                more = search.address is not None and len(rows) >= q.PAGE
            else:
                first, before = self._id_window(conn, search.filters, search.before)
                rows = store.console_emails(
                    conn, filters, before=before, from_id=first, limit=q.PAGE
                )
                more = len(rows) == q.PAGE
            templates = store.console_templates(conn)
        for row in rows:
            row["recipient"] = self._tag(row["recipient"])
        next_page: dict[str, str] = {}
        if more and rows:
            next_page = {**search.filters.as_query(), "before": str(rows[-1]["id"])}
            if search.ref:
                next_page["sealed_q"] = self.access.seal(search.ref)
        body = self._render(
            "emails.html",
            who,
            who.session,
            rows=rows,
            search=search,
            filters=search.filters.as_query(),
            templates=templates,
            next_page=next_page,
            next_get="" if search.ref else urlencode(next_page),
            parked=search.filters.status in q.PARKED and not search.ref,
        )
        return Answer(HTTPStatus.OK, body)

    def _id_window(
        self, conn: store.Conn, filters: q.Filters, before: int | None
    ) -> tuple[int, int | None]:
        """The ids a time filter covers, so the scan stays within them."""
        if filters.since is None and filters.until is None:
            return 0, before
        ends = store.console_id_range(conn)
        if ends is None:
            return 0, before
        first, end = q.id_window(
            filters, *ends, lambda outbox_id: store.console_created_at(conn, outbox_id)
        )
        if end is not None and (before is None or end < before):
            before = max(end, 1)
        return first, before

    def _email(self, who: Who, outbox_id: int, *, reveal: bool, notice: str = "") -> Answer:
        with self.pool.connection() as conn:
            row = store.console_email(conn, outbox_id)
            if row is None:
                return Answer(HTTPStatus.NOT_FOUND, self._bare("Not found", "No such email."))
            attempts = store.list_attempts(conn, outbox_id)
            events = store.list_events(conn, outbox_id)
            bounces = store.list_bounces(conn, outbox_id)
        message = self._message(row)
        address = row["recipient"]
        row["recipient"] = address if reveal else self._tag(address)
        trace_id = trace_id_of(row.pop("trace_context", None))
        row.pop("params")  # may hold personal data; the rendered message shows what was sent
        body = self._render(
            "email.html",
            who,
            who.session,
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
        return Answer(HTTPStatus.OK, body)

    def _message(self, row: dict[str, Any]) -> dict[str, Any]:
        """The message as a worker composes it, without its links' tokens (row id 0)."""
        outbox_row = store.OutboxRow(
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
            data = composer(self.settings).message(
                outbox_row, to=row["recipient"], connect=self.pool.connection
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

    def _suppressions(
        self, who: Who, query: Mapping[str, str], *, found: Any, notice: str = ""
    ) -> Answer:
        before = None
        if query.get("before_at"):
            at = q.parse_time(query["before_at"], "before_at")
            sealed = self.access.unseal(query.get("before", ""))
            if at is None or sealed is None:
                raise InvalidRequest("this page of the list has expired")
            before = (at, sealed)
        with self.pool.connection() as conn:
            entries = store.console_suppressions(conn, before=before, limit=q.PAGE)
        shown = [
            {
                "tag": self._tag(e.address),
                "sealed": self.access.seal(e.address),
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
        body = self._render(
            "suppressions.html",
            who,
            who.session,
            entries=shown,
            found=found,
            notice=notice,
            next_get=urlencode(next_page),
        )
        return Answer(HTTPStatus.OK, body)

    def _suppression_search(self, who: Who, form: Mapping[str, str]) -> Answer:
        address = _address(form.get("address", ""))
        with self.pool.connection() as conn:
            entry = store.find_suppression(conn, address)
        found = {
            "tag": self._tag(address),
            "sealed": self.access.seal(address),
            "entry": entry,
        }
        return self._suppressions(who, {}, found=found)

    def _audit(self, who: Who, query: Mapping[str, str], *, notice: str = "") -> Answer:
        before = q.parse_cursor(query.get("before", ""))
        with self.pool.connection() as conn:
            entries = store.console_audit_list(conn, before=before, limit=q.PAGE)
            sessions = store.console_session_list(conn, limit=MAX_SESSIONS)
        for s in sessions:
            s["yours"] = s.pop("token_hash") == token_hash(who.session)
        next_get = urlencode({"before": entries[-1]["id"]}) if len(entries) == q.PAGE else ""
        body = self._render(
            "audit.html",
            who,
            who.session,
            entries=entries,
            next_get=next_get,
            sessions=sessions,
            notice=notice,
        )
        return Answer(HTTPStatus.OK, body)

    # -- actions (operators) -------------------------------------------------------

    def _forbidden_unless_operator(self, who: Who) -> Answer | None:
        if who.user.may_act:
            return None
        return Answer(
            HTTPStatus.FORBIDDEN, self._bare("Not allowed", "Only an operator may do this.")
        )

    def _act_on_email(
        self, who: Who, outbox_id: int, action: str, form: Mapping[str, str]
    ) -> Answer:
        refused = self._forbidden_unless_operator(who)
        if refused is not None:
            return refused
        if action not in ("reveal", "requeue"):
            return Answer(HTTPStatus.NOT_FOUND, self._bare("Not found", "No such action."))
        reason = q.reason_of(form)
        with self.pool.connection() as conn:
            row = store.console_email(conn, outbox_id)
            if row is None:
                return Answer(HTTPStatus.NOT_FOUND, self._bare("Not found", "No such email."))
            target = f"email {outbox_id} ({row['idempotency_key']})"
            if action == "reveal":
                self._audit_write(who.user, "reveal", target, reason, conn=conn)
            else:
                woken = store.requeue_row(conn, outbox_id) if row["status"] in q.PARKED else []
                detail = {"from_status": row["status"], "requeued": len(woken)}
                self._audit_write(who.user, "requeue", target, reason, conn=conn, detail=detail)
        if action == "reveal":
            return self._email(who, outbox_id, reveal=True)
        notice = "Requeued: it is pending again." if woken else "Not requeued: it is not parked."
        return self._email(who, outbox_id, reveal=False, notice=notice)

    def _requeue_set(self, who: Who, form: Mapping[str, str]) -> Answer:
        """Step one shows how many rows the filters hold; step two (confirm) requeues them."""
        refused = self._forbidden_unless_operator(who)
        if refused is not None:
            return refused
        filters = q.parse_filters(form)
        if filters.status not in q.PARKED:
            raise InvalidRequest("choose a status to requeue: failed, dead or held")
        chosen = store.EmailFilter(**dataclasses.asdict(filters))
        with self.pool.connection() as conn:
            first, before = self._id_window(conn, filters, None)
            rows = store.console_emails(
                conn, chosen, before=before, from_id=first, limit=MAX_SET + 1
            )
            if form.get("confirm") != "yes":
                body = self._render(
                    "confirm.html",
                    who,
                    who.session,
                    count=min(len(rows), MAX_SET),
                    capped=len(rows) > MAX_SET,
                    filters=filters.as_query(),
                    reason=form.get("reason", ""),
                )
                return Answer(HTTPStatus.OK, body)
            reason = q.reason_of(form)
            woken = 0
            for row in rows[:MAX_SET]:
                woken += len(store.requeue_row(conn, row["id"]))
            detail = {"filters": filters.as_query(), "matched": len(rows), "requeued": woken}
            self._audit_write(
                who.user, "requeue-set", _describe(filters), reason, conn=conn, detail=detail
            )
        location = f"{PREFIX}/emails?" + urlencode(filters.as_query())
        return Answer(HTTPStatus.SEE_OTHER, location=location)

    def _revoke_session(self, who: Who, session_id: int, form: Mapping[str, str]) -> Answer:
        refused = self._forbidden_unless_operator(who)
        if refused is not None:
            return refused
        reason = q.reason_of(form)
        with self.pool.connection() as conn:
            ended = store.console_session_revoke_id(conn, session_id)
            if ended is not None:
                name, role = ended
                self._audit_write(
                    who.user, "session-revoke", f"session {session_id} ({name})", reason,
                    conn=conn, detail={"role": role},
                )  # fmt: skip
        notice = (
            f"Session {session_id} of {ended[0]} ended: they sign in again."
            if ended
            else f"Session {session_id} had ended already."
        )
        return self._audit(who, {}, notice=notice)

    def _suppression_change(self, who: Who, action: str, form: Mapping[str, str]) -> Answer:
        refused = self._forbidden_unless_operator(who)
        if refused is not None:
            return refused
        if action not in ("add", "remove"):
            return Answer(HTTPStatus.NOT_FOUND, self._bare("Not found", "No such action."))
        reason = q.reason_of(form)
        sealed = form.get("sealed", "")
        raw = self.access.unseal(sealed) if sealed else form.get("address", "")
        if raw is None:
            raise InvalidRequest("this form has expired: search for the address again")
        address = _address(raw)
        tag = self._tag(address)
        with self.pool.connection() as conn:
            if action == "add":
                scope = form.get("scope", "all")
                if scope not in ("all", "bulk"):
                    raise InvalidRequest("scope must be all or bulk")
                changed = store.suppress(conn, address, reason="manual", scope=scope, detail=reason)
                notice = f"{tag} suppressed ({scope})." if changed else f"{tag} already suppressed."
            else:
                changed = store.unsuppress(conn, address)
                notice = f"{tag} may get mail again." if changed else f"{tag} is not suppressed."
            self._audit_write(
                who.user, f"suppression-{action}", tag, reason, conn=conn,
                detail={"changed": changed},
            )  # fmt: skip
        return self._suppressions(who, {}, found=None, notice=notice)

    # -- helpers -------------------------------------------------------------------

    def _audit_write(
        self,
        user: User,
        action: str,
        target: str | None,
        reason: str,
        *,
        conn: store.Conn | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        def write(c: store.Conn) -> None:
            store.console_audit_add(
                c,
                actor=user.name,
                role=str(user.role),
                action=action,
                target=target,
                reason=reason,
                detail=detail,
            )

        if conn is not None:
            write(conn)  # in the action's own transaction: both happen, or neither
            return
        with self.pool.connection() as own:
            write(own)

    def _tag(self, address: str) -> str:
        return redact.recipient_tag(address, secret=self.settings.secret)

    def _render(
        self, name: str, who: Who | None, session: Session, *, clear: bool = False, **values: Any
    ) -> str:
        """The page; with ``clear`` (an operator's audited reveal) addresses stay."""
        page = self.pages.get_template(name).render(
            user=who.user if who else None,
            operator=bool(who and who.user.role is Role.OPERATOR),
            csrf=self.access.csrf_token(session),
            now=dt.datetime.now(dt.UTC),
            **values,
        )
        if clear:
            return self.redactor.secrets_only(page)
        # No address in clear on any page, whichever field or reply text held it.
        return self.redactor.text(page)

    def _bare(self, title: str, text: str) -> str:
        page = self.pages.get_template("bare.html").render(
            title=title, text=text, user=None, operator=False, csrf=""
        )
        return self.redactor.text(page)


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


def _address(raw: str) -> str:
    try:
        return normalize_address(raw.strip()).lower()
    except InvalidAddress as exc:
        raise InvalidRequest(str(exc)) from None


def _describe(filters: q.Filters) -> str:
    return ", ".join(f"{k}={v}" for k, v in filters.as_query().items())


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
