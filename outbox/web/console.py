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

This module is what every page shares: the request and answer, the gate each
page is behind (who is asking, the CSRF token of a form), rendering and the
audit. The pages are :mod:`outbox.web.console_pages` (to look),
:mod:`outbox.web.console_actions` (to act) and
:mod:`outbox.web.console_sign_in`; :mod:`outbox.web.console_routes` puts them
on Starlette's router.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from outbox import redact
from outbox.config import Settings
from outbox.db.store import connections, console_sessions
from outbox.errors import InvalidAddress, InvalidRequest, StoreError
from outbox.validate import normalize_address
from outbox.web import console_query as q
from outbox.web.console_auth import Access, Role, Session, SignInLimiter, User, token_hash

log = logging.getLogger(__name__)

PREFIX = "/console"
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
    params: Mapping[str, str] = field(default_factory=dict)  # of the path: {"outbox_id": "42"}


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


# A page behind the gate: what it answers the signed-in user.
Page = Callable[[Who, Asked], Answer]
# A page before it (signing in).
OpenPage = Callable[[Asked], Answer]


class Console:
    def __init__(self, settings: Settings, pool: connections.Pool) -> None:
        self.settings = settings
        self.pool = pool
        self.access = Access.from_settings(settings)
        self.limiter = SignInLimiter()  # its own lock: sign-ins run in worker threads
        self.redactor = redact.Redactor.from_settings(settings)
        # Each value is tagged before it is escaped, where an address is still
        # plain text; the page as a whole passes the redactor again (render).
        self.pages = self._environment(finalize=self._tagged)
        self.revealing_pages = self._environment(finalize=None)

    def _environment(self, finalize: Callable[[Any], Any] | None) -> jinja2.Environment:
        pages = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_PAGES),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            finalize=finalize,
        )
        pages.globals.update(
            prefix=PREFIX,
            statuses=q.STATUSES,
            priorities=q.PRIORITIES,
            grafana_url=self.settings.grafana_url,
            jaeger_url=self.settings.jaeger_url.rstrip("/"),
        )
        return pages

    def _tagged(self, value: Any) -> Any:
        if isinstance(value, markupsafe.Markup):
            return markupsafe.Markup(self.redactor.text(str(value)))  # noqa: S704  # already HTML
        if isinstance(value, str):
            return self.redactor.text(value)
        return value

    # -- the gate ----------------------------------------------------------------

    def handle(self, asked: Asked, page: Page | None) -> Answer:
        """``page``'s answer, to a signed-in user and a form of theirs only;
        None is a page the console does not have: not found, once signed in."""
        return self._caught(asked, lambda: self._gated(asked, page or self._not_found))

    def handle_open(self, asked: Asked, page: OpenPage) -> Answer:
        """``page``'s answer to anyone: the sign-in form and its POST."""
        return self._caught(asked, lambda: page(asked))

    def _caught(self, asked: Asked, answer: Callable[[], Answer]) -> Answer:
        try:
            return answer()
        except InvalidRequest as exc:
            return Answer(HTTPStatus.BAD_REQUEST, self.bare("Not understood", str(exc)))
        except StoreError:
            log.exception("console page %s failed", asked.path)
            return Answer(
                HTTPStatus.SERVICE_UNAVAILABLE, self.bare("Try again", "The database failed.")
            )

    def _gated(self, asked: Asked, page: Page) -> Answer:
        who = self._who(asked)
        if who is None:
            if asked.method == "POST":
                return Answer(HTTPStatus.FORBIDDEN, self.bare("Sign in", "Sign in first."))
            return Answer(HTTPStatus.SEE_OTHER, location=f"{PREFIX}/login")
        if asked.method == "POST" and not self.access.csrf_ok(
            who.session, asked.form.get("csrf", "")
        ):
            return Answer(
                HTTPStatus.FORBIDDEN,
                self.bare("Refused", "This form is out of date or not ours: reload the page."),
            )
        answer = page(who, asked)
        if who.new_cookie:
            answer.cookie = self.set_cookie(who.session)
        return answer

    def _not_found(self, who: Who, asked: Asked) -> Answer:
        return self.not_found("No such page.")

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
            held = console_sessions.console_session_find(conn, hashed)
            if held is None:  # signed out, revoked, expired, or from before sessions were held
                return None
            user = self.access.holder(session, user_name=held.user_name, role=held.role)
            if user is None:  # removed from the list, or given another role: sign in again
                console_sessions.console_session_revoke(conn, hashed)
                return None
        return Who(user, session, new_cookie=False)

    def set_cookie(self, session: Session) -> str:
        value = (
            f"{self.access.cookie_name}={self.access.cookie(session)}; Path=/; HttpOnly; "
            f"SameSite=Strict; Max-Age={self.access.session_seconds}"
        )
        return value + "; Secure" if self.access.secure else value

    def forbidden_unless_operator(self, who: Who) -> Answer | None:
        if who.user.may_act:
            return None
        return Answer(
            HTTPStatus.FORBIDDEN, self.bare("Not allowed", "Only an operator may do this.")
        )

    # -- what pages share ----------------------------------------------------------

    def audit_write(
        self,
        user: User,
        action: str,
        target: str | None,
        reason: str,
        *,
        conn: connections.Conn | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        def write(c: connections.Conn) -> None:
            console_sessions.console_audit_add(
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

    def tag(self, address: str) -> str:
        return redact.recipient_tag(address, secret=self.settings.secret)

    def render(
        self, name: str, who: Who | None, session: Session, *, clear: bool = False, **values: Any
    ) -> str:
        """The page; with ``clear`` (an operator's audited reveal) addresses stay."""
        pages = self.revealing_pages if clear else self.pages
        page = pages.get_template(name).render(
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

    def ok(self, name: str, who: Who, *, clear: bool = False, **values: Any) -> Answer:
        """200 with the page ``name`` rendered for ``who``."""
        return Answer(HTTPStatus.OK, self.render(name, who, who.session, clear=clear, **values))

    def bare(self, title: str, text: str) -> str:
        page = self.pages.get_template("bare.html").render(
            title=title, text=text, user=None, operator=False, csrf=""
        )
        return self.redactor.text(page)

    def not_found(self, text: str) -> Answer:
        return Answer(HTTPStatus.NOT_FOUND, self.bare("Not found", text))


def form_address(raw: str) -> str:
    """An address typed into a form, as the suppression list keys it."""
    try:
        return normalize_address(raw.strip()).lower()
    except InvalidAddress as exc:
        raise InvalidRequest(str(exc)) from None
