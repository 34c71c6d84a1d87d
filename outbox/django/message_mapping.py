"""Django ``EmailMessage`` → :func:`outbox.enqueue` keyword arguments (pure).

:func:`enqueue_arguments` maps everything a Django message carries: the
recipients, subject, text and HTML, From, Reply-To, Cc, Bcc, extra headers
and attachments, plus the Outbox fields a caller sets in headers:

- ``Idempotency-Key`` (or ``X-Outbox-Idempotency-Key``): the business event's
  key. Without one a random key is made, and then only the commit is
  de-duplicated: a retried business operation that sends again is a second email.
- ``X-Outbox-Template``, ``X-Outbox-Params`` (a JSON object) and
  ``X-Outbox-Priority``: send a template of OUTBOX_TEMPLATES.

A message to several ``to`` addresses becomes one email per address (keys
``KEY:1``, ``KEY:2``…; Cc and Bcc go with the first). The From is the
message's ``from_email`` (within ``OUTBOX_SENDER_DOMAINS``), except when it is
``DEFAULT_FROM_EMAIL``, which Django puts there when none is given: then
``OUTBOX_FROM`` applies. :func:`supported` keeps what :func:`outbox.enqueue`
takes and names anything it could not take, so nothing is dropped unsaid.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection
from typing import Any

import orjson

from outbox.errors import InvalidParams

KEY_HEADERS = ("Idempotency-Key", "X-Outbox-Idempotency-Key")
TEMPLATE_HEADER = "X-Outbox-Template"
PARAMS_HEADER = "X-Outbox-Params"
PRIORITY_HEADER = "X-Outbox-Priority"
_OURS = {h.lower() for h in (*KEY_HEADERS, TEMPLATE_HEADER, PARAMS_HEADER, PRIORITY_HEADER)}


def _new_key() -> str:
    return f"django-{uuid.uuid4().hex}"


def enqueue_arguments(
    message: Any, *, new_key: Callable[[], str] = _new_key, default_from: str | None = None
) -> list[dict[str, Any]]:
    """One mapping of enqueue's keyword arguments per ``to`` address of ``message``.

    ``default_from`` is the project's ``DEFAULT_FROM_EMAIL``: a message from it
    is sent from ``OUTBOX_FROM``.
    """
    headers = {str(k): str(v) for k, v in (getattr(message, "extra_headers", None) or {}).items()}
    by_name = {k.lower(): v for k, v in headers.items()}
    key = next((by_name[h.lower()] for h in KEY_HEADERS if h.lower() in by_name), None)
    common: dict[str, Any] = {
        "subject": message.subject or None,
        "text": None,
        "html": None,
        "sender": None if message.from_email == default_from else message.from_email or None,
        "reply_to": list(message.reply_to) or None,
        "headers": {k: v for k, v in headers.items() if k.lower() not in _OURS} or None,
        "attachments": [_attachment(a) for a in message.attachments] or None,
    }
    common["text"], common["html"] = _bodies(message)
    common.update(_outbox_fields(by_name))
    return _per_recipient(message, key or new_key(), common)


def _bodies(message: Any) -> tuple[str | None, str | None]:
    """(text, html): the body as its subtype says, an HTML alternative replacing the html."""
    text: str | None = None
    html: str | None = None
    if getattr(message, "content_subtype", "plain") == "html":
        html = message.body or None
    else:
        text = message.body or None
    for content, mimetype in getattr(message, "alternatives", None) or ():
        if mimetype == "text/html":
            html = content
    return text, html


def _outbox_fields(by_name: dict[str, str]) -> dict[str, Any]:
    """template, params and priority from the X-Outbox-* headers that are present."""
    fields: dict[str, Any] = {}
    if TEMPLATE_HEADER.lower() in by_name:
        fields["template"] = by_name[TEMPLATE_HEADER.lower()]
    if PARAMS_HEADER.lower() in by_name:
        fields["params"] = _params(by_name[PARAMS_HEADER.lower()])
    if PRIORITY_HEADER.lower() in by_name:
        fields["priority"] = by_name[PRIORITY_HEADER.lower()]
    return fields


def _per_recipient(message: Any, base: str, common: dict[str, Any]) -> list[dict[str, Any]]:
    """One email per ``to`` address, keyed ``base`` or ``base:N``; Cc and Bcc go with the first."""
    recipients = list(message.to)
    return [
        {
            "idempotency_key": base if len(recipients) == 1 else f"{base}:{index}",
            "to": address,
            **common,
            "cc": (list(message.cc) or None) if index == 1 else None,
            "bcc": (list(message.bcc) or None) if index == 1 else None,
        }
        for index, address in enumerate(recipients, start=1)
    ]


def supported(email: dict[str, Any], accepted: Collection[str]) -> tuple[dict[str, Any], list[str]]:
    """(what enqueue takes, the names of fields with a value it cannot take)."""
    kept = {k: v for k, v in email.items() if k in accepted or k == "idempotency_key"}
    lost = sorted(k for k, v in email.items() if v is not None and k not in kept)
    return {k: v for k, v in kept.items() if v is not None}, lost


def _params(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidParams(f"{PARAMS_HEADER} must hold a JSON object: {exc}") from None


def _attachment(item: Any) -> dict[str, Any]:
    if isinstance(item, tuple):  # (filename, content, mimetype), Django's EmailAttachment too
        filename, content, mimetype = item
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        return {"filename": filename, "content": data, "content_type": mimetype}
    payload = item.get_payload(decode=True)  # a MIMEBase part
    return {
        "filename": item.get_filename(),
        "content": payload,
        "content_type": item.get_content_type(),
    }
