"""The console's sign-in by password and sign-out.

Sign-in has its own anonymous session, so its form carries a CSRF token
too. Failed sign-ins are limited per name, and password verifications run
``HASHES_AT_ONCE`` at a time; a session signed in is held in
``console_session`` until it expires, is signed out or is revoked.
"""

from __future__ import annotations

import logging
import threading
from http import HTTPStatus

from outbox.db.store import console_sessions
from outbox.web.console import PREFIX, Answer, Asked, Console, Who
from outbox.web.console_auth import Session, token_hash

log = logging.getLogger(__name__)


# Password verifications at once, each holding argon2's 64 MiB; the others wait
# their turn, and past HASH_WAIT_SECONDS get a 503.
HASHES_AT_ONCE = 2
HASH_WAIT_SECONDS = 10.0


class SignIn:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.hashing = threading.BoundedSemaphore(HASHES_AT_ONCE)

    def form(self, asked: Asked) -> Answer:
        """GET /login: the form, in the browser's anonymous session or a new one."""
        return self._form(asked, HTTPStatus.OK, error="")

    def sign_in(self, asked: Asked) -> Answer:
        """POST /login: a session of the user's own, or the form again with why not."""
        console, access = self.console, self.console.access
        session = access.session(asked.cookie)
        if session is None:
            return self._form(asked, HTTPStatus.FORBIDDEN, error="Try again.")
        if not access.csrf_ok(session, asked.form.get("csrf", "")):
            return Answer(
                HTTPStatus.FORBIDDEN, console.bare("Refused", "Reload the sign-in page and retry.")
            )
        name = asked.form.get("name", "").strip()
        # Per name only: behind a proxy every client has the proxy's address, and
        # a limit per address would let anyone lock everyone out.
        keys = (f"name:{name}",)
        attempt = console.limiter.begin(keys)  # counted as failed until it is not
        if attempt is None:
            body = console.render(
                "login.html", None, session, error="Too many failed sign-ins: try again later."
            )
            return Answer(HTTPStatus.TOO_MANY_REQUESTS, body)
        # Each verification holds 64 MiB (argon2's memory cost): a few at once.
        if not self.hashing.acquire(timeout=HASH_WAIT_SECONDS):
            console.limiter.withdraw(keys, attempt)
            body = console.render("login.html", None, session, error="Busy: try again.")
            return Answer(HTTPStatus.SERVICE_UNAVAILABLE, body)
        try:
            user = access.sign_in(name, asked.form.get("password", ""))
        finally:
            self.hashing.release()
        if user is None:
            log.info("console sign-in refused")  # the name may be a password typed in the wrong box
            body = console.render("login.html", None, session, error="Wrong name or password.")
            return Answer(HTTPStatus.UNAUTHORIZED, body)
        console.limiter.withdraw(keys, attempt)
        signed_in = access.new_session(user.name)
        with console.pool.connection() as conn:
            # Expired sessions go here, a bounded batch at a time: every session
            # is made by a sign-in, so the deletes keep up with the inserts.
            console_sessions.console_session_purge(conn)
            console_sessions.console_session_add(
                conn,
                token_hash=token_hash(signed_in),
                user_name=user.name,
                role=str(user.role),
                expires_at=access.expires_at(signed_in),
            )
            console.audit_write(user, "sign-in", None, "password", conn=conn)
        return Answer(
            HTTPStatus.SEE_OTHER, location=f"{PREFIX}/", cookie=console.set_cookie(signed_in)
        )

    def _form(self, asked: Asked, status: HTTPStatus, *, error: str) -> Answer:
        session: Session | None = self.console.access.session(asked.cookie)
        fresh = session if session is not None else self.console.access.new_session("")
        body = self.console.render("login.html", None, fresh, error=error)
        return Answer(status, body, cookie=self.console.set_cookie(fresh))

    def sign_out(self, who: Who, asked: Asked) -> Answer:
        """POST /logout: the session ends here, not only in this browser."""
        access = self.console.access
        with self.console.pool.connection() as conn:
            # A copy of the cookie is refused too.
            console_sessions.console_session_revoke(conn, token_hash(who.session))
            self.console.audit_write(who.user, "sign-out", None, "signed out", conn=conn)
        expired = f"{access.cookie_name}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict"
        if access.secure:
            expired += "; Secure"
        return Answer(HTTPStatus.SEE_OTHER, location=f"{PREFIX}/login", cookie=expired)
