"""Who may use ``/console`` and with which role; signed sessions and CSRF tokens.

Users come from ``OUTBOX_CONSOLE_USERS`` (``name:role:argon2-hash`` entries,
or a file of them) or from a header an authenticating proxy sets, believed
only from ``OUTBOX_CONSOLE_TRUSTED_PROXIES``. The cookie is signed under a key
derived from OUTBOX_SECRET and names the user and a random nonce. A session
signed in by password is also held server side (``console_session``, under
the nonce's SHA-256): every request needs its row live, so signing out or an
operator's revoke ends it, even for a copy of the cookie, and a user removed
from the list, or given another role, loses it at their next request. Behind
the trusted proxy the proxy is the session: its header signs each request in,
and the cookie only carries the nonce. The CSRF token is an HMAC of the
nonce: a page from elsewhere can neither read it nor compute it.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import ipaddress
import json
import re
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from cryptography.fernet import Fernet, InvalidToken

from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.token_signatures import keyed_digest

SESSION_PURPOSE = "console-session"
CSRF_PURPOSE = "console-csrf"
SEAL_PURPOSE = "console-seal"
SEAL_SECONDS = 3600  # a sealed address in a page's form works for an hour
_HASHER = PasswordHasher()
# A dummy hash verified for unknown names, so a sign-in takes as long either way.
_DUMMY = _HASHER.hash(secrets.token_urlsafe(16))
# Entries are separated by whitespace, ";" or a comma that starts a new
# "name:role:" (an argon2 hash holds commas of its own: "m=65536,t=3,p=4").
_SEPARATOR = re.compile(r"[;\s]+|,(?=[\w.@+-]+:[a-z]+:)")
_NAME = re.compile(r"[\w.@+-]{1,64}")


class Role(StrEnum):
    VIEWER = "viewer"  # looks; sees recipients only as tags
    OPERATOR = "operator"  # may act and reveal an address (both audited)


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: Role
    password_hash: str  # empty: signs in only through the proxy's header

    @property
    def may_act(self) -> bool:
        return self.role is Role.OPERATOR


def hash_password(password: str) -> str:
    if not password:
        raise ConfigError("an empty password cannot sign in")
    return _HASHER.hash(password)


def parse_users(raw: str) -> dict[str, User]:
    """``OUTBOX_CONSOLE_USERS`` as given (not a file path): name → user."""
    users: dict[str, User] = {}
    lines = [line for line in raw.splitlines() if not line.lstrip().startswith("#")]
    for entry in _SEPARATOR.split("\n".join(lines)):
        if not entry:
            continue
        name, sep, rest = entry.partition(":")
        role, sep2, password_hash = rest.partition(":")
        if not sep or not sep2 or not _NAME.fullmatch(name):
            raise ConfigError(
                "OUTBOX_CONSOLE_USERS entries must be name:role:argon2-hash (name of letters, "
                "digits and ._@+-)"
            )
        if role not in Role.__members__.values():
            raise ConfigError(f"OUTBOX_CONSOLE_USERS: {name}'s role must be viewer or operator")
        if password_hash and not password_hash.startswith("$argon2"):
            raise ConfigError(
                f"OUTBOX_CONSOLE_USERS: {name}'s hash is not an argon2 hash "
                "(make one with `outbox console hash-password`)"
            )
        if name in users:
            raise ConfigError(f"OUTBOX_CONSOLE_USERS names {name} twice")
        users[name] = User(name, Role(role), password_hash)
    return users


def read_users(value: str) -> dict[str, User]:
    """The setting's users: inline entries, or the file it names."""
    if value.startswith(("/", "./", "../")):
        path = Path(value)
        try:
            return parse_users(path.read_text("utf-8"))
        except OSError as exc:
            raise ConfigError(f"OUTBOX_CONSOLE_USERS: cannot read {path}: {exc.strerror}") from None
    return parse_users(value)


def parse_networks(raw: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    found = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        try:
            found.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ConfigError(
                f"OUTBOX_CONSOLE_TRUSTED_PROXIES: {item!r} is not an address or network"
            ) from None
    return tuple(found)


@dataclass(frozen=True, slots=True)
class Session:
    user: str
    nonce: str  # random per sign-in; the CSRF token is derived from it
    expires: int  # unix seconds


@dataclass(frozen=True)
class Access:
    users: dict[str, User]
    sso_header: str  # lower-case header name; empty: no single sign-on
    proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    secret: str
    previous: tuple[str, ...]
    session_seconds: int
    secure: bool

    @classmethod
    def from_settings(cls, settings: Settings) -> Access:
        if not settings.secret:
            raise ConfigError("the console needs OUTBOX_SECRET to sign its sessions")
        return cls(
            users=read_users(settings.console_users) if settings.console_users else {},
            sso_header=settings.console_sso_header.strip().lower(),
            proxies=parse_networks(settings.console_trusted_proxies),
            secret=settings.secret,
            previous=settings.previous_secret_list,
            session_seconds=int(settings.console_session_seconds),
            secure=settings.console_secure_cookie == "on",
        )

    @property
    def cookie_name(self) -> str:
        # "__Host-": browsers accept it only Secure, for path "/", from this host alone.
        return "__Host-outbox-console" if self.secure else "outbox-console"

    def sign_in(self, name: str, password: str) -> User | None:
        """The user, when the password is theirs; the same work for an unknown name."""
        user = self.users.get(name)
        stored = user.password_hash if user and user.password_hash else _DUMMY
        ok: bool
        try:
            ok = _HASHER.verify(stored, password)
        except (VerificationError, InvalidHashError):
            ok = False
        return user if ok and user is not None and user.password_hash else None

    def from_proxy(self, client_host: str | None, headers: dict[str, str]) -> User | None:
        """The user the trusted proxy names, if this request came through it."""
        if not self.sso_header or client_host is None or not self.is_trusted(client_host):
            return None
        name = headers.get(self.sso_header, "").strip()
        if not _NAME.fullmatch(name):
            return None
        known = self.users.get(name)
        return User(name, known.role if known else Role.VIEWER, "")

    def is_trusted(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self.proxies)

    def holder(self, session: Session, *, user_name: str, role: str) -> User | None:
        """Who a session held server side belongs to now: the user it was signed in
        by, still listed, still signing in by password, with the role of then (the
        list may have changed since)."""
        user = self.users.get(session.user)
        if user is None or not user.password_hash:
            return None
        return user if user.name == user_name and str(user.role) == role else None

    def new_session(self, user: str, *, now: float | None = None) -> Session:
        issued = time.time() if now is None else now
        return Session(user, secrets.token_urlsafe(32), int(issued) + self.session_seconds)

    def cookie(self, session: Session) -> str:
        payload = json.dumps([session.user, session.nonce, session.expires], separators=(",", ":"))
        body = base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")
        return f"{body}.{keyed_digest(self.secret, SESSION_PURPOSE, body)}"

    def session(self, cookie: str | None, *, now: float | None = None) -> Session | None:
        """The session a cookie carries, when its signature holds and it has not expired."""
        if not cookie or cookie.count(".") != 1:
            return None
        body, signature = cookie.split(".")
        matches = [
            hmac.compare_digest(keyed_digest(key, SESSION_PURPOSE, body), signature)
            for key in (self.secret, *self.previous)
        ]
        if not any(matches):
            return None
        try:
            padded = body + "=" * (-len(body) % 4)
            user, nonce, expires = json.loads(base64.urlsafe_b64decode(padded))
        except (ValueError, TypeError):
            return None
        if not (isinstance(user, str) and isinstance(nonce, str) and isinstance(expires, int)):
            return None
        if expires <= (time.time() if now is None else now):
            return None
        return Session(user, nonce, expires)

    def expires_at(self, session: Session) -> dt.datetime:
        return dt.datetime.fromtimestamp(session.expires, dt.UTC)

    def csrf_token(self, session: Session) -> str:
        return keyed_digest(self.secret, CSRF_PURPOSE, session.nonce)[:32]

    def csrf_ok(self, session: Session, token: str) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf_token(session), token)

    def seal(self, value: str) -> str:
        """``value`` encrypted for a hidden form field: a page may carry an address
        (the next page of a search, a suppression to remove) without showing it."""
        return _fernet(self.secret).encrypt(value.encode("utf-8")).decode("ascii")

    def unseal(self, token: str) -> str | None:
        for key in (self.secret, *self.previous):
            try:
                return _fernet(key).decrypt(token.encode("ascii"), ttl=SEAL_SECONDS).decode()
            except (InvalidToken, UnicodeError):
                continue
        return None


def token_hash(session: Session) -> bytes:
    """What ``console_session`` keeps of a session's nonce: its SHA-256. The nonce
    is 32 random bytes, beyond any search, so a plain hash is as safe as a slow
    one and each request finds its row by one indexed lookup."""
    return hashlib.sha256(session.nonce.encode("utf-8", "surrogatepass")).digest()


def _fernet(secret: str) -> Fernet:
    key = bytes.fromhex(keyed_digest(secret, SEAL_PURPOSE, "fernet"))
    return Fernet(base64.urlsafe_b64encode(key))


@dataclass
class SignInLimiter:
    """At most ``failures`` failed sign-ins per key (a name) in ``window``
    seconds; past that, sign-in is refused without checking the password
    until the oldest failure ages out (in this process's memory).

    A check in progress counts as a failure (:meth:`begin`) until it succeeds
    (:meth:`withdraw`): a burst of concurrent guesses gets no more checks than
    the limit, where checking first and counting after let every one through."""

    failures: int = 10
    window: float = 900.0
    _seen: dict[str, deque[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self, keys: tuple[str, ...], *, now: float | None = None) -> float | None:
        """The attempt's time, counted as a failure, if one more is allowed; else None."""
        at = time.monotonic() if now is None else now
        with self._lock:
            if not self.allowed(keys, now=at):
                return None
            self.failed(keys, now=at)
        return at

    def withdraw(self, keys: tuple[str, ...], attempt: float) -> None:
        """The attempt begun at ``attempt`` did not fail (it signed in, or was never checked)."""
        with self._lock:
            for key in keys:
                times = self._seen.get(key)
                if times is not None and attempt in times:
                    times.remove(attempt)

    def allowed(self, keys: tuple[str, ...], *, now: float | None = None) -> bool:
        at = time.monotonic() if now is None else now
        return all(len(self._recent(key, at)) < self.failures for key in keys)

    def failed(self, keys: tuple[str, ...], *, now: float | None = None) -> None:
        at = time.monotonic() if now is None else now
        for key in keys:
            self._recent(key, at).append(at)
        if len(self._seen) > 10_000:  # forget keys whose failures all aged out
            for key in [k for k, v in self._seen.items() if not v or v[-1] <= at - self.window]:
                del self._seen[key]

    def _recent(self, key: str, at: float) -> deque[float]:
        times = self._seen.setdefault(key, deque())
        while times and times[0] <= at - self.window:
            times.popleft()
        return times
