"""The HTTP API for applications in any language: enqueue and look up emails.

``POST /v1/emails`` with an ``Idempotency-Key`` header is :func:`outbox.enqueue`
over HTTP, answered once committed (requests arriving together share a commit:
:mod:`outbox.web.enqueue_groups`): 202 and the email's id when it is new,
200 and the same body when the key and the content were seen before, 409 when
the key was used for other content, 422 with every bad field otherwise. Nothing
is written on any error. ``POST /v1/emails/batch`` is
:func:`outbox.enqueue_many`, all or nothing. ``GET /v1/emails/{id}`` and
``GET /v1/emails?idempotency_key=…`` show the status, attempts and events.
``DELETE /v1/emails/{id}`` (send scope) is :func:`outbox.cancel`: 200 when the
email is cancelled (now or before), 409 when a worker has taken it already.
``GET /v1/events?after=CURSOR&limit=N`` is :func:`outbox.read_events` for the
key's owner: its emails' events in feed order and the cursor to pass next.

Every route but ``/v1/openapi.json`` takes ``Authorization: Bearer <key>`` (see
:mod:`outbox.web.api_keys`): no key, a wrong or revoked one: 401; a key
without the route's scope: 403; over the key's rate: 429 with Retry-After.
A key reaches only its owner's emails (:mod:`outbox.web.owners`): another
owner's id or idempotency key answers 404, as a missing one does, and an
idempotency key is its owner's alone; an operator key reaches every email.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

import orjson

from outbox import cancelling, intake, redact
from outbox.config import Settings
from outbox.db.store import api_key_rows, connections, lookups
from outbox.errors import (
    IdempotencyConflict,
    InvalidCursor,
    InvalidKey,
    InvalidMessage,
    StoreError,
)
from outbox.events import feed
from outbox.validate import check_key
from outbox.web import api_keys, email_request
from outbox.web.email_request import (
    CONFLICT,
    DEFAULT_OWNER,
    INVALID,
    KEY_HEADER,
    PROBLEM,
    TOO_LATE,
    problem,
)
from outbox.web.enqueue_groups import EnqueueGroups
from outbox.web.openapi import document
from outbox.web.owners import Owner
from outbox.web.rate_limit import RateLimiter, retry_after

log = logging.getLogger(__name__)
PREFIX = "/v1/"
_JSON = "application/json"
_CACHE_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class ApiResponse:
    status: int
    body: bytes
    content_type: str = _JSON
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Key:
    id: int
    name: str
    scopes: frozenset[str]
    owner: Owner = DEFAULT_OWNER  # whose emails it reaches


def _json(status: int, body: object, headers: Mapping[str, str] | None = None) -> ApiResponse:
    return ApiResponse(status, orjson.dumps(body), _JSON, headers or {})


def _problem(
    status: HTTPStatus, detail: str, headers: Mapping[str, str] | None = None, **kw: Any
) -> ApiResponse:
    doc = problem(int(status), status.phrase, detail, **kw)
    return ApiResponse(int(status), orjson.dumps(doc), PROBLEM, headers or {})


class EmailsApi:
    """What the routes under ``/v1/`` do, apart from HTTP parsing (tested directly too)."""

    def __init__(
        self,
        settings: Settings,
        pool: connections.Pool,
        *,
        key_cache_seconds: float = 5.0,  # a revoked key stops working within this time
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.key_cache_seconds = key_cache_seconds
        self.clock = clock
        self.limiter = RateLimiter(settings.api_rate, settings.api_burst)
        self._keys: dict[str, tuple[float, Key]] = {}
        self._lock = threading.Lock()
        self._openapi = orjson.dumps(document())
        # Single-email POSTs share commits; a quarter of the pool commits at
        # once, the rest serves lookups, batches and the console.
        self.groups = EnqueueGroups(
            pool,
            self._enqueue_on,
            committers=max(1, settings.web_pool_size // 4),
        )

    def close(self) -> None:
        self.groups.close()

    def _enqueue_on(self, conn: connections.Conn, arguments: dict[str, Any]) -> intake.Enqueued:
        return intake.enqueue(conn, settings=self.settings, **arguments)

    def handle(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> ApiResponse:
        if path == "/v1/openapi.json":
            return ApiResponse(200, self._openapi) if method == "GET" else _not_allowed("GET")
        route = self._route(method, path)
        if route is None:
            return _problem(HTTPStatus.NOT_FOUND, "no such route")
        scope, action = route
        key = self._key(headers.get("authorization"))
        if key is None:
            return _problem(
                HTTPStatus.UNAUTHORIZED,
                "a live API key is needed: Authorization: Bearer obx_…",
                {"WWW-Authenticate": 'Bearer realm="outbox"'},
            )
        if scope not in key.scopes and not (scope == "read" and "send" in key.scopes):
            return _problem(HTTPStatus.FORBIDDEN, f"this key's scopes do not include {scope}")
        wait = self.limiter.take(key.id, self.clock())
        if wait > 0:
            return _problem(
                HTTPStatus.TOO_MANY_REQUESTS,
                f"over {self.settings.api_rate:g} requests per second for this key",
                {"Retry-After": retry_after(wait)},
            )
        try:
            return action(key, path, query, headers, body)
        except StoreError:
            log.exception("the HTTP API could not reach the database")
            return _problem(HTTPStatus.SERVICE_UNAVAILABLE, "the database is unavailable")

    Action = Callable[[Key, str, str, Mapping[str, str], bytes], ApiResponse]

    def _route(self, method: str, path: str) -> tuple[str, EmailsApi.Action] | None:
        if path == "/v1/emails":
            return {"POST": ("send", self._send), "GET": ("read", self._find)}.get(method) or (
                "read",
                lambda *_: _not_allowed("GET, POST"),
            )
        if path == "/v1/emails/batch":
            if method != "POST":
                return "send", lambda *_: _not_allowed("POST")
            return "send", self._send_batch
        if path == "/v1/events":
            return ("read", self._events) if method == "GET" else ("read", _not_allowed_get)
        if path.startswith("/v1/emails/"):
            if method == "DELETE":
                return "send", self._cancel
            if method != "GET":
                return "read", lambda *_: _not_allowed("GET, DELETE")
            return "read", self._show
        return None

    def _key(self, authorization: str | None) -> Key | None:
        token = api_keys.bearer(authorization)
        if token is None:
            return None
        digest = api_keys.token_hash(token)
        now = self.clock()
        cached = self._keys.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        with self.pool.connection() as conn:
            found = api_key_rows.find_api_key(conn, digest)
        if found is None:
            return None
        key = Key(found.id, found.name, frozenset(found.scopes), Owner(found.owner, found.operator))
        with self._lock:
            if len(self._keys) >= _CACHE_LIMIT:
                self._keys.clear()
            self._keys[digest] = (now + self.key_cache_seconds, key)
        return key

    def _send(
        self, key: Key, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> ApiResponse:
        parsed, bad = _parsed(body)
        if bad is not None:
            return bad
        idempotency_key = headers.get(KEY_HEADER.lower())
        errors = email_request.key_errors(idempotency_key, key.owner)
        errors += email_request.email_fields(parsed)
        if errors:
            return _invalid(errors)
        arguments = {
            "idempotency_key": key.owner.stored_key(idempotency_key or ""),
            **email_request.enqueue_arguments(parsed),
        }
        try:
            result = self.groups.enqueue(arguments)  # committed when it returns
        except IdempotencyConflict as exc:
            return _problem(HTTPStatus.CONFLICT, key.owner.shown_text(str(exc)), type_=CONFLICT)
        except InvalidMessage as exc:
            return _invalid([email_request.intake_error(exc)])
        return _json(202 if result.created else 200, _accepted(result, key.owner))

    def _send_batch(
        self, key: Key, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> ApiResponse:
        parsed, bad = _parsed(body)
        if bad is not None:
            return bad
        errors = email_request.batch_fields(parsed, key.owner)
        if errors:
            return _invalid(errors)
        owner = key.owner
        try:
            with self.pool.connection() as conn:
                emails = [
                    {
                        **email_request.enqueue_arguments(e),
                        "idempotency_key": owner.stored_key(e["idempotency_key"]),
                    }
                    for e in parsed["emails"]
                ]
                results = intake.enqueue_many(conn, emails, settings=self.settings)
        except IdempotencyConflict as exc:
            return _problem(HTTPStatus.CONFLICT, owner.shown_text(str(exc)), type_=CONFLICT)
        except InvalidMessage as exc:
            return _invalid([email_request.intake_error(exc, batch=True)])
        created = any(r.created for r in results)
        emails = [{**_accepted(r, owner), "created": r.created} for r in results]
        return _json(202 if created else 200, {"emails": emails})

    def _show(
        self, key: Key, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> ApiResponse:
        ref = path.removeprefix("/v1/emails/")
        if not ref.isdigit() or len(ref) > 18:
            return _problem(HTTPStatus.NOT_FOUND, "no email with that id")
        return self._email(key, id_=int(ref))

    def _cancel(
        self, key: Key, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> ApiResponse:
        ref = path.removeprefix("/v1/emails/")
        if not ref.isdigit() or len(ref) > 18:
            return _problem(HTTPStatus.NOT_FOUND, "no email with that id")
        reason = "cancelled through the HTTP API"
        if body.strip():
            parsed, bad = _parsed(body)
            if bad is not None:
                return bad
            errors = email_request.cancel_fields(parsed)
            if errors:
                return _invalid(errors)
            reason = parsed.get("reason") or reason
        try:
            with self.pool.connection() as conn:  # commits on leaving, rolls back on an error
                row = lookups.api_email(conn, visible=key.owner.visible(), id_=int(ref))
                if row is None:
                    return _problem(HTTPStatus.NOT_FOUND, "no email with that id")
                done = cancelling.cancel(
                    conn, row["idempotency_key"], reason=reason, by=f"api key {key.name}"
                )
        except InvalidMessage as exc:
            return _invalid([email_request.BadField("/reason", str(exc))])
        if done.status != "cancelled":
            return _problem(
                HTTPStatus.CONFLICT,
                f"the email is {done.status} already: too late to cancel it",
                type_=TOO_LATE,
            )
        return _json(
            200,
            {
                "id": row["id"],
                "idempotency_key": key.owner.shown_key(row["idempotency_key"]),
                "status": "cancelled",
                "cancelled": done.cancelled,  # False: it was cancelled before
            },
        )

    def _find(
        self, key: Key, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> ApiResponse:
        keys = parse_qs(query).get("idempotency_key", [])
        if len(keys) != 1 or not keys[0]:
            error = email_request.BadField("idempotency_key", "one query parameter is required")
            return _invalid([error])
        try:
            checked = check_key(keys[0])  # a key enqueue would refuse names no email
        except InvalidKey as exc:
            return _invalid([email_request.BadField("idempotency_key", str(exc))])
        return self._email(key, key_=key.owner.stored_key(checked))

    def _events(
        self, key: Key, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> ApiResponse:
        params = parse_qs(query)
        after: str | None = (params.get("after") or [""])[0] or None
        limit_text = (params.get("limit") or ["100"])[0]
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= feed.MAX_LIMIT:
            error = f"a whole number from 1 to {feed.MAX_LIMIT}"
            return _invalid([email_request.BadField("limit", error)])
        try:
            with self.pool.connection() as conn:
                events = feed.read_owner_events(
                    conn,
                    after,
                    int(limit_text),
                    visible=key.owner.visible(),
                    secret=self.settings.secret,
                    shown_key=key.owner.shown_key,
                )
        except InvalidCursor as exc:
            return _invalid([email_request.BadField("after", str(exc))])
        cursor = events[-1]["cursor"] if events else after
        return _json(200, {"events": events, "next_cursor": cursor})

    def _email(self, key: Key, *, id_: int | None = None, key_: str | None = None) -> ApiResponse:
        with self.pool.connection() as conn:
            row = lookups.api_email(conn, visible=key.owner.visible(), id_=id_, key=key_)
            events = lookups.list_events(conn, row["id"]) if row else []
        if row is None:
            return _problem(HTTPStatus.NOT_FOUND, "no email with that id or key")
        return _json(200, self._shown(row, events, key))

    def _shown(self, row: dict[str, Any], events: list[dict[str, Any]], key: Key) -> dict[str, Any]:
        clear = "read" in key.scopes
        secret = self.settings.secret
        ours = redact.OwnAddresses.from_settings(self.settings)

        def text(value: str | None) -> str | None:
            if value is None or clear:
                return value
            return redact.addresses(value, secret=secret, ours=ours)

        recipient = row["recipient"]
        return {
            "id": row["id"],
            "idempotency_key": text(key.owner.shown_key(row["idempotency_key"])),
            "message_id": row["message_id"],
            "recipient": recipient if clear else redact.recipient_tag(recipient, secret=secret),
            "template": row["template"],
            "priority": row["priority"],
            "status": row["status"],
            "status_reason": text(row["status_reason"]),
            "attempts": row["attempts"],
            "created_at": row["created_at"],
            "next_attempt_at": row["next_attempt_at"],
            "sent_at": row["sent_at"],
            "failed_at": row["failed_at"],
            "events": [
                {
                    "from": e["from_status"],
                    "to": e["to_status"],
                    "reason": text(e["reason"]),
                    "actor": e["actor"],
                    "at": e["at"],
                }
                for e in events
            ],
        }


def _accepted(result: intake.Enqueued, owner: Owner) -> dict[str, Any]:
    # The status as accepted, so a repeated request gets the same body; GET shows the current one.
    return {
        "id": result.id,
        "message_id": result.message_id,
        "idempotency_key": owner.shown_key(result.idempotency_key),
        "status": "suppressed" if result.suppressed else "accepted",
    }


def _parsed(body: bytes) -> tuple[Any, ApiResponse | None]:
    try:
        return orjson.loads(body), None
    except orjson.JSONDecodeError:
        return None, _problem(HTTPStatus.BAD_REQUEST, "the body is not JSON")


def _invalid(errors: list[email_request.BadField]) -> ApiResponse:
    names = ", ".join(e.where for e in errors)
    return _problem(
        HTTPStatus.UNPROCESSABLE_ENTITY,
        f"nothing was written; fix: {names}",
        type_=INVALID,
        errors=errors,
    )


def _not_allowed_get(*_: object) -> ApiResponse:
    return _not_allowed("GET")


def _not_allowed(allowed: str) -> ApiResponse:
    return _problem(HTTPStatus.METHOD_NOT_ALLOWED, f"use {allowed}", {"Allow": allowed})
