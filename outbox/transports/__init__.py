"""Transports: how a built message leaves. SMTP now; HTTP providers plug in here."""

from __future__ import annotations

from outbox.transports.base import OutgoingMessage, Transport
from outbox.transports.smtp import SmtpTransport

__all__ = ["OutgoingMessage", "SmtpTransport", "Transport"]
