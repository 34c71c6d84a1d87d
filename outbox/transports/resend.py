"""Resend's API: ``POST /emails`` with a JSON message and an idempotency key.

What this relies on (Resend documentation, "Send Email", "Idempotency Keys"
and "Errors"):

- Authentication is ``Authorization: Bearer re_…``; requests and responses
  are JSON.
- The message is fields: ``from`` (``Name <address>``), ``to``, ``subject``,
  ``text``, ``html``, ``reply_to``, ``headers`` (an object of custom headers)
  and ``attachments`` (``filename``, base64 ``content``, ``content_type``,
  ``content_id`` for inline parts).
- The ``Idempotency-Key`` header (up to 256 characters) is remembered for 24
  hours: the same key with the same payload returns the first response and
  sends nothing; the same key with another payload is 409
  ``invalid_idempotent_request``; while the first request is still being
  processed, 409 ``concurrent_idempotent_requests``. The outbox key is that
  key, so a response lost after the request left is a plain retry — as long
  as retries stay within the 24 hours (``OUTBOX_MAX_AGE_SECONDS`` ≤ 86400).
- 200 answers ``{"id": "…"}``, the id its webhooks name (stored as
  ``provider_message_id``).
- Errors are ``{"statusCode", "name", "message"}``: 400 ``validation_error``
  or ``invalid_idempotency_key``; 401 ``missing_api_key``; 403
  ``invalid_api_key`` or ``validation_error`` (an unverified domain); 422
  ``invalid_from_address``, ``invalid_attachment``, ``invalid_parameter``,
  ``missing_required_field``; 429 ``rate_limit_exceeded``,
  ``daily_quota_exceeded``, ``monthly_quota_exceeded`` with ``retry-after``;
  451 ``security_error``; 500 ``application_error``, ``internal_server_error``.
- Whether a ``Message-ID`` in ``headers`` reaches the recipient unchanged is
  not documented; it is sent, and ``X-Outbox-Message-ID`` carries it too.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from outbox.fields.senders import format_mailbox
from outbox.models import HttpReply, Reply, Stage
from outbox.transports import http
from outbox.transports.base import OutgoingMessage, provider_tags
from outbox.transports.parts import split

API_URL = "https://api.resend.com"
MAX_KEY = 256

# Not about this message: another request with the key is still in flight.
_TRANSIENT_ERRORS = frozenset({"concurrent_idempotent_requests"})


@dataclass(frozen=True)
class ResendConfig:
    api_key: str
    http: http.HttpConfig = field(default_factory=lambda: http.HttpConfig(API_URL))

    def __repr__(self) -> str:  # never print the key
        return f"ResendConfig({self.http.base_url})"


def idempotency_key(key: str) -> str:
    """The outbox key as a header value: itself when it fits, else its SHA-256.

    Outbox keys are at most 255 characters but may hold non-ASCII, which an
    HTTP header cannot carry; the digest is as unique and as stable.
    """
    if key.isascii() and key.isprintable() and len(key) <= MAX_KEY:
        return key
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def payload(message: OutgoingMessage) -> dict[str, Any]:
    """The ``/emails`` request for one built message."""
    parts = split(message.data, message.message_id)
    # `from` is documented as "Name <address>": the name goes decoded, not RFC 2047.
    # A name with a comma or quote goes quoted, or Resend would read two addresses.
    address = parts.sender_address
    sender = format_mailbox(parts.sender_name, address) if parts.sender_name else parts.sender
    body: dict[str, Any] = {
        "from": sender,
        "to": [message.recipient],
        "subject": parts.subject,
        "headers": dict(parts.headers),
    }
    if parts.text is not None:
        body["text"] = parts.text
    if parts.html is not None:
        body["html"] = parts.html
    if parts.reply_to:
        body["reply_to"] = parts.reply_to
    if message.cc:
        body["cc"] = list(message.cc)
    if message.bcc:
        body["bcc"] = list(message.bcc)
    tags = provider_tags(message)
    if tags:
        body["tags"] = [{"name": name, "value": value} for name, value in tags]
    if parts.files:
        body["attachments"] = [
            {
                "filename": f.filename,
                "content": base64.b64encode(f.data).decode("ascii"),
                "content_type": f.content_type,
                **({"content_id": f.content_id} if f.content_id else {}),
            }
            for f in parts.files
        ]
    return body


def parse_response(status: int, body: bytes, headers: Mapping[str, str]) -> HttpReply:
    data = http.json_object(body)
    if 200 <= status < 300:
        message_id = data.get("id")
        return HttpReply(
            Stage.RESPONSE,
            status,
            "OK",
            provider_message_id=str(message_id) if message_id else None,
        )
    name = str(data.get("name") or "")
    message = str(data.get("message") or "").strip()
    text = f"{name}: {message}" if name else message
    return HttpReply(
        Stage.RESPONSE,
        status,
        text or http.body_excerpt(body),
        retry_after=http.retry_after(headers.get("retry-after")),
        transient=name in _TRANSIENT_ERRORS,
    )


class ResendTransport:
    def __init__(self, config: ResendConfig) -> None:
        self.config = config
        self._client = http.make_client(config.http, {"Authorization": f"Bearer {config.api_key}"})

    def send(self, message: OutgoingMessage) -> Reply:
        try:
            request = payload(message)
        except Exception as exc:  # our own message did not parse: nothing left
            return HttpReply(Stage.REQUEST, error=f"could not build the request: {exc!r}")
        return http.post_json(
            self._client,
            "/emails",
            request,
            parse=parse_response,
            headers={"Idempotency-Key": idempotency_key(message.idempotency_key)},
            idempotent=True,
            before_send=message.before_commit,
        )

    def close(self) -> None:
        self._client.close()
