"""Postmark's Email API: ``POST /email`` with a JSON message.

What this relies on (Postmark developer documentation, "Email API" and "API
overview: error codes"):

- Authentication is the ``X-Postmark-Server-Token`` header; requests and
  responses are JSON (``Accept`` and ``Content-Type: application/json``).
- The message is fields, not MIME: ``From``, ``To``, ``Subject``,
  ``TextBody``, ``HtmlBody``, ``ReplyTo``, ``Headers`` (a list of
  ``{"Name", "Value"}``), ``Attachments`` (``Name``, base64 ``Content``,
  ``ContentType``, and ``ContentID`` as ``cid:…`` for inline parts) and
  ``MessageStream`` (``outbound`` is the default transactional stream).
- A ``Message-ID`` passed in ``Headers`` is the one the recipient gets (the
  ``X-PM-KeepID`` header is the SMTP service's switch for the same thing).
- 200 answers ``{"To", "SubmittedAt", "MessageID", "ErrorCode": 0, "Message":
  "OK"}``; ``MessageID`` is Postmark's own id, the one its bounce and
  delivery webhooks name, so it is the stored ``provider_message_id``.
- Refusals: 401 for a missing or wrong token; 422 with ``{"ErrorCode",
  "Message"}`` (300 invalid email request, 406 inactive recipient: a hard
  bounce, spam complaint or manual suppression, 400/401 sender signature not
  found/confirmed, 405 not allowed to send, 412 account pending, 413 account
  may not send); 429 rate limit exceeded; 500 and 503.
- There is no idempotency key: a response lost after the request left is an
  uncertain delivery.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from outbox.models import HttpReply, Reply, Stage
from outbox.transports import http
from outbox.transports.base import OutgoingMessage
from outbox.transports.parts import split

API_URL = "https://api.postmarkapp.com"

# ErrorCodes about our token, account or sender signature, not this message:
# failing every email for good over them would lose them all.
_ACCOUNT_ERRORS = frozenset({10, 100, 400, 401, 405, 412, 413})


@dataclass(frozen=True)
class PostmarkConfig:
    server_token: str
    message_stream: str = "outbound"
    http: http.HttpConfig = field(default_factory=lambda: http.HttpConfig(API_URL))

    def __repr__(self) -> str:  # never print the token
        return f"PostmarkConfig({self.http.base_url}, stream={self.message_stream})"


def payload(message: OutgoingMessage, *, message_stream: str) -> dict[str, Any]:
    """The ``/email`` request for one built message."""
    parts = split(message.data, message.message_id)
    body: dict[str, Any] = {
        "From": parts.sender,
        "To": message.recipient,
        "Subject": parts.subject,
        "Headers": [{"Name": name, "Value": value} for name, value in parts.headers],
        "MessageStream": message_stream,
    }
    if parts.text is not None:
        body["TextBody"] = parts.text
    if parts.html is not None:
        body["HtmlBody"] = parts.html
    if parts.reply_to:
        body["ReplyTo"] = parts.reply_to
    if message.cc:
        body["Cc"] = ", ".join(message.cc)
    if message.bcc:
        body["Bcc"] = ", ".join(message.bcc)
    if message.tags:
        body["Tag"] = message.tags[0]  # Postmark takes one tag; the first is the main one
    if message.metadata:
        body["Metadata"] = dict(message.metadata)
    if parts.files:
        body["Attachments"] = [
            {
                "Name": f.filename,
                "Content": base64.b64encode(f.data).decode("ascii"),
                "ContentType": f.content_type,
                **({"ContentID": f"cid:{f.content_id}"} if f.content_id else {}),
            }
            for f in parts.files
        ]
    return body


def parse_response(status: int, body: bytes, headers: Mapping[str, str]) -> HttpReply:
    data = http.json_object(body)
    text = str(data.get("Message") or "").strip()
    error_code = data.get("ErrorCode")
    if 200 <= status < 300:
        message_id = data.get("MessageID")
        return HttpReply(
            Stage.RESPONSE,
            status,
            text or "OK",
            provider_message_id=str(message_id) if message_id else None,
        )
    if isinstance(error_code, int):
        text = f"ErrorCode {error_code}: {text}"
    return HttpReply(
        Stage.RESPONSE,
        status,
        text or http.body_excerpt(body),
        retry_after=http.retry_after(headers.get("retry-after")),
        transient=error_code in _ACCOUNT_ERRORS,
    )


class PostmarkTransport:
    def __init__(self, config: PostmarkConfig) -> None:
        self.config = config
        self._client = http.make_client(
            config.http, {"X-Postmark-Server-Token": config.server_token}
        )

    def send(self, message: OutgoingMessage) -> Reply:
        try:
            request = payload(message, message_stream=self.config.message_stream)
        except Exception as exc:  # our own message did not parse: nothing left
            return HttpReply(Stage.REQUEST, error=f"could not build the request: {exc!r}")
        return http.post_json(
            self._client,
            "/email",
            request,
            parse=parse_response,
            before_send=message.before_commit,
        )

    def close(self) -> None:
        self._client.close()
