"""The seam between delivery and the wire."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from outbox.errors import TransportBusy
from outbox.models import Reply

__all__ = ["OutgoingMessage", "Transport", "TransportBusy"]


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    envelope_from: str  # MAIL FROM (the return path bounces come back to)
    recipient: str  # RCPT TO
    data: bytes  # the whole message, CRLF line endings
    message_id: str
    idempotency_key: str  # passed on to providers whose API takes one
    smtputf8: bool = False  # the addresses need RFC 6531
    # Called right before the point after which the peer may have the message (the
    # SMTP end-of-data dot, an HTTP provider's request leaving): delivery waits
    # there for the thread's previous result to be recorded, so a crash resends at
    # most one message per thread.
    before_commit: Callable[[], None] | None = None


class Transport(Protocol):
    """Sends one message and reports what the peer said; never raises for a send."""

    def send(self, message: OutgoingMessage) -> Reply: ...

    def close(self) -> None: ...
