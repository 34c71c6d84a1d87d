"""The seam between delivery and the wire."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from outbox.errors import TransportBusy
from outbox.models import Reply

__all__ = ["OutgoingMessage", "Transport", "TransportBusy", "provider_tags"]

_TAG_VALUE = re.compile(r"[A-Za-z0-9_-]{1,256}")


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    envelope_from: str  # MAIL FROM (the return path bounces come back to)
    recipient: str  # RCPT TO
    data: bytes  # the whole message, CRLF line endings
    message_id: str
    idempotency_key: str  # passed on to providers whose API takes one
    smtputf8: bool = False  # the addresses need RFC 6531
    # The email's labels (outbox.fields.labels), for providers that take them; never in the data.
    tags: tuple[str, ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()  # values as text
    cc: tuple[str, ...] = ()  # more recipients: RCPT TO, and in the Cc header
    bcc: tuple[str, ...] = ()  # more recipients: RCPT TO only, in no header
    # Called right before the point after which the peer may have the message (the
    # SMTP end-of-data dot, an HTTP provider's request leaving): delivery waits
    # there for the thread's previous result to be recorded, so a crash resends at
    # most one message per thread.
    before_commit: Callable[[], None] | None = None


def provider_tags(message: OutgoingMessage) -> list[tuple[str, str]]:
    """Tags and metadata as the name/value tags of Resend and SES.

    A tag is a name with the value ``true``; a metadata field is its key and
    value, when the value fits those APIs' alphabet (ASCII letters, digits,
    ``_``, ``-``, at most 256 characters); other values stay in Outbox only.
    """
    found = [(tag, "true") for tag in message.tags]
    found += [(k, v) for k, v in message.metadata if _TAG_VALUE.fullmatch(v)]
    return list(dict(found).items())  # one value per name; metadata wins over a tag


class Transport(Protocol):
    """Sends one message and reports what the peer said; never raises for a send."""

    def send(self, message: OutgoingMessage) -> Reply: ...

    def close(self) -> None: ...
