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

import inspect
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
    UnknownTemplate,
)

MAX_BATCH = 1000  # emails per POST /v1/emails/batch
KEY_HEADER = "Idempotency-Key"
PROBLEM = "application/problem+json"
# Problem types, relative to the API (documented in docs/http-api.md).
INVALID = "/v1/problems/invalid-email"
CONFLICT = "/v1/problems/idempotency-conflict"

# enqueue's keyword arguments but the connection's, the key (a header) and settings.
FIELDS: tuple[str, ...] = tuple(
    name
    for name, p in inspect.signature(intake.enqueue).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in {"idempotency_key", "settings"}
)
_REQUIRED = ("to", "template")
_STRINGS = ("to", "template")
_PRIORITIES = ("high", "bulk")


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
    allowed = set(FIELDS) | ({"idempotency_key"} if with_key else set())
    errors = [
        BadField(f"{pointer}/{name}", "is not a field of an email")
        for name in sorted(set(body) - allowed)
    ]
    required = (*_REQUIRED, "idempotency_key") if with_key else _REQUIRED
    errors += [
        BadField(f"{pointer}/{name}", "is required") for name in required if name not in body
    ]
    strings = (*_STRINGS, "idempotency_key") if with_key else _STRINGS
    errors += [
        BadField(f"{pointer}/{name}", "must be a string")
        for name in strings
        if name in body and not isinstance(body[name], str)
    ]
    if body.get("params") is not None and not isinstance(body["params"], dict):
        errors.append(BadField(f"{pointer}/params", "must be a JSON object"))
    if body.get("priority") is not None and body["priority"] not in _PRIORITIES:
        errors.append(BadField(f"{pointer}/priority", "must be high or bulk"))
    return sorted(errors, key=lambda e: e.where)


def batch_fields(body: object) -> list[BadField]:
    if not isinstance(body, dict) or set(body) != {"emails"}:
        return [BadField("/", 'must be a JSON object with one member, "emails"')]
    emails = body["emails"]
    if not isinstance(emails, list) or not 1 <= len(emails) <= MAX_BATCH:
        return [BadField("/emails", f"must be an array of 1 to {MAX_BATCH} emails")]
    errors = []
    for index, email in enumerate(emails):
        errors += email_fields(email, f"/emails/{index}", with_key=True)
    return errors


def key_errors(key: str | None) -> list[BadField]:
    if key is None or not key.strip():
        return [BadField(KEY_HEADER, "is required: one key per business event", header=True)]
    return []


def field_of(exc: InvalidMessage) -> str:
    """The field an error of intake's validation is about."""
    text = str(exc)
    if isinstance(exc, InvalidKey):
        return "idempotency_key"
    if isinstance(exc, InvalidAddress) or (
        isinstance(exc, HeaderInjection) and "recipient" in text
    ):
        return "to"
    if isinstance(exc, UnknownTemplate):
        return "template"
    if isinstance(exc, InvalidParams) and text.startswith("priority"):
        return "priority"
    if isinstance(exc, MissingParams | InvalidParams | HeaderInjection):
        return "params"
    for name in FIELDS:  # a field added to intake names itself first in its message
        if text.startswith(name):
            return name
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
