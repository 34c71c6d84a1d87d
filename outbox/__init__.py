"""Outbox: transactional email sent once per business event.

The application calls :func:`enqueue` (or ``await`` :func:`enqueue_async`) inside its
own Postgres transaction, on whatever driver it uses; the
relay and the send workers do the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from outbox.config import Settings
from outbox.errors import (
    ConfigError,
    HeaderInjection,
    IdempotencyConflict,
    InvalidAddress,
    InvalidContent,
    InvalidField,
    InvalidKey,
    InvalidMessage,
    InvalidParams,
    MissingParams,
    OutboxError,
    SenderNotAllowed,
    StoreError,
    TemplateError,
    TransportError,
    UnknownTemplate,
)
from outbox.models import Priority, Status

if TYPE_CHECKING:
    from outbox.cancelling import Cancellation, cancel, cancel_async
    from outbox.events.feed import read_events, read_events_async
    from outbox.intake import (
        Enqueued,
        enqueue,
        enqueue_async,
        enqueue_many,
        enqueue_many_async,
    )

# Imported on first use: they bring in psycopg, which tools that only parse
# (`python -m outbox.bounce_parsing`) do not need.
_LAZY = {
    "Cancellation": "outbox.cancelling",
    "cancel": "outbox.cancelling",
    "cancel_async": "outbox.cancelling",
    "Enqueued": "outbox.intake",
    "enqueue": "outbox.intake",
    "enqueue_async": "outbox.intake",
    "enqueue_many": "outbox.intake",
    "enqueue_many_async": "outbox.intake",
    "read_events": "outbox.events.feed",
    "read_events_async": "outbox.events.feed",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'outbox' has no attribute {name!r}")


__all__ = [
    "Cancellation",
    "ConfigError",
    "Enqueued",
    "HeaderInjection",
    "IdempotencyConflict",
    "InvalidAddress",
    "InvalidContent",
    "InvalidField",
    "InvalidKey",
    "InvalidMessage",
    "InvalidParams",
    "MissingParams",
    "OutboxError",
    "Priority",
    "SenderNotAllowed",
    "Settings",
    "Status",
    "StoreError",
    "TemplateError",
    "TransportError",
    "UnknownTemplate",
    "cancel",
    "cancel_async",
    "enqueue",
    "enqueue_async",
    "enqueue_many",
    "enqueue_many_async",
    "read_events",
    "read_events_async",
]
