"""Transports: how a built message leaves. SMTP, or an HTTP provider's API.

:func:`build_transport` returns the one the settings name. The provider
classes load on first use, so importing this package does not import httpx
or boto3.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from outbox.transports.base import OutgoingMessage, Transport
from outbox.transports.select import build_transport
from outbox.transports.smtp import SmtpTransport

if TYPE_CHECKING:
    from outbox.transports.limit import Limited
    from outbox.transports.postmark import PostmarkTransport
    from outbox.transports.resend import ResendTransport
    from outbox.transports.ses import SesTransport

_LAZY = {
    "Limited": "outbox.transports.limit",
    "PostmarkTransport": "outbox.transports.postmark",
    "ResendTransport": "outbox.transports.resend",
    "SesTransport": "outbox.transports.ses",
}

__all__ = [
    "Limited",
    "OutgoingMessage",
    "PostmarkTransport",
    "ResendTransport",
    "SesTransport",
    "SmtpTransport",
    "Transport",
    "build_transport",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
