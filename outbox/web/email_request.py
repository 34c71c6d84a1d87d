"""The HTTP API's request bodies and problem documents (pure).

A request names the same fields as :func:`outbox.enqueue`'s keyword
arguments; the list is read from its signature, so a field intake learns is
accepted here too. This module checks only the JSON shape (types, required,
unknown fields) and reports every bad field at once; what an email must be
(an address, a known template, the params it needs) is checked by intake's
one validation path, whose error is mapped back to the field it is about.
Problems are RFC 9457 ``application/problem+json`` documents with an
``errors`` list of ``{"pointer", "detail"}`` (``pointer`` a JSON Pointer into
the body, or ``header`` for a header).
"""

from __future__ import annotations

import binascii
import datetime as dt
import inspect
import re
from dataclasses import dataclass
from typing import Any

from outbox import intake
from outbox.errors import (
    HeaderInjection,
    InvalidAddress,
    InvalidKey,
    InvalidMessage,
    InvalidParams,
    MissingParams,
    SenderNotAllowed,
    UnknownTemplate,
)
from outbox.web.owners import Owner

MAX_BATCH = 1000  # emails per POST /v1/emails/batch
KEY_HEADER = "Idempotency-Key"
PROBLEM = "application/problem+json"
# Problem types, relative to the API (documented in docs/http-api.md).
INVALID = "/v1/problems/invalid-email"
CONFLICT = "/v1/problems/idempotency-conflict"
TOO_LATE = "/v1/problems/too-late-to-cancel"
DEFAULT_OWNER = Owner(None)

# enqueue's keyword arguments but the connection's, the key (a header) and settings.
FIELDS: tuple[str, ...] = tuple(
    name
    for name, p in inspect.signature(intake.enqueue).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in {"idempotency_key", "settings"}
)
_FIELD_NAMES = frozenset(FIELDS)
_KEYED_FIELDS = _FIELD_NAMES | {"idempotency_key"}  # a batch's email names its own key
_REQUIRED = ("to",)  # template: absent or null for an email of its own subject, text, html
_STRINGS = ("to",)
_OPTIONAL_STRINGS = ("template", "sender", "subject", "text", "html", "locale")
_PRIORITIES = ("high", "bulk")
_ATTACHMENT_KEYS = frozenset({"filename", "content", "content_type"})
# Messages of intake's checks that do not start with their field's name.
_MESSAGE_FIELDS = (
    ("header ", "headers"),
    ("a header name", "headers"),
    ("each tag", "tags"),
    ("attachment #", "attachments"),
    ("an email without a template needs a subject", "subject"),
    ("an email without a template needs text", "text"),
    ("content is ", "text"),
    ("subject, text and html are for an email without a template", "template"),
    ("the email has ", "cc"),  # to, cc and bcc over the limit together
)


@dataclass(frozen=True, slots=True)
class BadField:
    where: str  # a JSON Pointer into the body ("/emails/3/to"), or a header's name
    detail: str
    header: bool = False

    def as_json(self) -> dict[str, str]:
        if self.header:
            return {"header": self.where, "detail": self.detail}
        return {"pointer": self.where, "detail": self.detail}


def email_fields(body: object, pointer: str = "", *, with_key: bool = False) -> list[BadField]:
    """Every shape problem of one email object (``with_key``: a batch item names its key)."""
    if not isinstance(body, dict):
        return [BadField(pointer or "/", "must be a JSON object")]
    errors = _name_errors(body, pointer, with_key=with_key)
    errors += _type_errors(body, pointer, with_key=with_key)
    errors += _value_errors(body, pointer)
    errors += _attachment_fields(body.get("attachments"), f"{pointer}/attachments")
    return sorted(errors, key=lambda e: e.where) if errors else errors


def _name_errors(body: dict[str, Any], pointer: str, *, with_key: bool) -> list[BadField]:
    """Fields an email does not have, and required ones missing."""
    allowed = _KEYED_FIELDS if with_key else _FIELD_NAMES  # made once: a batch checks 1,000
    errors = [
        BadField(f"{pointer}/{name}", "is not a field of an email")
        for name in sorted(body.keys() - allowed)
    ]
    required = (*_REQUIRED, "idempotency_key") if with_key else _REQUIRED
    errors += [
        BadField(f"{pointer}/{name}", "is required") for name in required if name not in body
    ]
    return errors


def _type_errors(body: dict[str, Any], pointer: str, *, with_key: bool) -> list[BadField]:
    """Fields of the wrong JSON type."""
    strings = (*_STRINGS, "idempotency_key") if with_key else _STRINGS
    errors = [
        BadField(f"{pointer}/{name}", "must be a string")
        for name in strings
        if name in body and not isinstance(body[name], str)
    ]
    errors += [
        BadField(f"{pointer}/{name}", "must be a string or null")
        for name in _OPTIONAL_STRINGS
        if body.get(name) is not None and not isinstance(body[name], str)
    ]
    if body.get("params") is not None and not isinstance(body["params"], dict):
        errors.append(BadField(f"{pointer}/params", "must be a JSON object"))
    return errors


def _value_errors(body: dict[str, Any], pointer: str) -> list[BadField]:
    """Fields of the right type with a value no email has: another priority, a bare time."""
    errors = []
    if body.get("priority") is not None and body["priority"] not in _PRIORITIES:
        errors.append(BadField(f"{pointer}/priority", "must be high or bulk"))
    if body.get("send_at") is not None and _instant(body["send_at"]) is None:
        errors.append(
            BadField(f"{pointer}/send_at", "must be an RFC 3339 date-time with a time zone")
        )
    return errors


def enqueue_arguments(body: dict[str, Any]) -> dict[str, Any]:
    """An email object checked by :func:`email_fields` as enqueue's keyword arguments.

    JSON has no date-time nor bytes: ``send_at`` is RFC 3339 text and an
    attachment's ``content`` is base64; everything else is passed as given,
    for intake to check.
    """
    arguments = {**body, "template": body.get("template")}
    if body.get("send_at") is not None:
        arguments["send_at"] = _instant(body["send_at"])
    if body.get("attachments") is not None:
        arguments["attachments"] = [
            {**item, "content": _base64(item["content"])} for item in body["attachments"]
        ]
    return arguments


_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", re.I)


def _instant(value: object) -> dt.datetime | None:
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        return None
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        return None


def _base64(text: str) -> bytes | None:
    """The bytes of strict base64 text, or None (a non-ASCII character is no base64 either)."""
    try:
        return binascii.a2b_base64(text.encode("ascii"), strict_mode=True)
    except (UnicodeEncodeError, binascii.Error):
        return None


def _attachment_fields(items: object, pointer: str) -> list[BadField]:
    if items is None:
        return []
    if not isinstance(items, list):
        return [BadField(pointer, 'must be an array of {"filename", "content" (base64)}')]
    errors = []
    for index, item in enumerate(items):
        where = f"{pointer}/{index}"
        if not isinstance(item, dict):
            errors.append(BadField(where, "must be a JSON object"))
            continue
        errors += [
            BadField(f"{where}/{name}", "is not a field of an attachment")
            for name in sorted(set(item) - _ATTACHMENT_KEYS)
        ]
        content = item.get("content")
        if not isinstance(content, str):
            errors.append(BadField(f"{where}/content", "must be the file's bytes in base64"))
            continue
        if _base64(content) is None:
            errors.append(BadField(f"{where}/content", "is not valid base64"))
    return errors


def batch_fields(body: object, owner: Owner = DEFAULT_OWNER) -> list[BadField]:
    if not isinstance(body, dict) or set(body) != {"emails"}:
        return [BadField("/", 'must be a JSON object with one member, "emails"')]
    emails = body["emails"]
    if not isinstance(emails, list) or not 1 <= len(emails) <= MAX_BATCH:
        return [BadField("/emails", f"must be an array of 1 to {MAX_BATCH} emails")]
    errors = []
    for index, email in enumerate(emails):
        errors += email_fields(email, f"/emails/{index}", with_key=True)
        key = email.get("idempotency_key") if isinstance(email, dict) else None
        problem = owner.key_problem(key) if isinstance(key, str) else None
        if problem is not None:
            errors.append(BadField(f"/emails/{index}/idempotency_key", problem))
    return errors


def cancel_fields(body: object) -> list[BadField]:
    """The optional body of a cancellation: ``{"reason": "..."}``."""
    if not isinstance(body, dict) or set(body) - {"reason"}:
        return [BadField("/", 'must be a JSON object with at most one member, "reason"')]
    if body.get("reason") is not None and not isinstance(body["reason"], str):
        return [BadField("/reason", "must be a string")]
    return []


def key_errors(key: str | None, owner: Owner = DEFAULT_OWNER) -> list[BadField]:
    """The ``Idempotency-Key`` header's problems, for a key of ``owner``."""
    if key is None or not key.strip():
        return [BadField(KEY_HEADER, "is required: one key per business event", header=True)]
    problem = owner.key_problem(key)
    return [] if problem is None else [BadField(KEY_HEADER, problem, header=True)]


def field_of(exc: InvalidMessage) -> str:
    """The field an error of intake's validation is about."""
    text = str(exc)
    if isinstance(exc, InvalidKey):
        return "idempotency_key"
    if isinstance(exc, SenderNotAllowed):
        return "sender"
    for start, name in _MESSAGE_FIELDS:
        if text.startswith(start):
            return name
    if isinstance(exc, UnknownTemplate):
        return "template"
    if isinstance(exc, MissingParams):
        return "params"
    if isinstance(exc, InvalidParams) and text.startswith("priority"):
        return "priority"
    for name in FIELDS:  # intake's checks of a field name it first in their message
        if name not in {"to", "params", "priority"} and re.match(rf"{name}\b", text):
            return name
    if isinstance(exc, InvalidAddress) or (
        isinstance(exc, HeaderInjection) and "recipient" in text
    ):
        return "to"
    if isinstance(exc, InvalidParams | HeaderInjection):
        return "params"
    return ""


def intake_error(exc: InvalidMessage, *, batch: bool = False) -> BadField:
    """``exc`` as a field error; a batch's message starts with ``email #N: ``."""
    text = str(exc)
    prefix = ""
    if batch and text.startswith("email #"):
        number, _, text = text.removeprefix("email #").partition(": ")
        prefix = f"/emails/{number}"
    field = field_of(type(exc)(text))
    if field == "idempotency_key" and not batch:
        return BadField(KEY_HEADER, text, header=True)
    return BadField(f"{prefix}/{field}" if field else prefix or "/", text)


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    type_: str = "about:blank",
    errors: list[BadField] | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": type_, "title": title, "status": status, "detail": detail}
    if errors:
        doc["errors"] = [e.as_json() for e in errors]
    return doc
