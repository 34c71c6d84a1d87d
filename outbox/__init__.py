"""Outbox: transactional email sent once per business event.

The application calls :func:`enqueue` inside its own Postgres transaction; the
relay and the send workers do the rest.
"""

from __future__ import annotations

from outbox.config import Settings
from outbox.enqueue import Enqueued, enqueue, enqueue_many
from outbox.errors import (
    ConfigError,
    HeaderInjection,
    IdempotencyConflict,
    InvalidAddress,
    InvalidKey,
    InvalidMessage,
    InvalidParams,
    MissingParams,
    OutboxError,
    StoreError,
    TemplateError,
    TransportError,
    UnknownTemplate,
)
from outbox.models import Priority, Status

__all__ = [
    "ConfigError",
    "Enqueued",
    "HeaderInjection",
    "IdempotencyConflict",
    "InvalidAddress",
    "InvalidKey",
    "InvalidMessage",
    "InvalidParams",
    "MissingParams",
    "OutboxError",
    "Priority",
    "Settings",
    "Status",
    "StoreError",
    "TemplateError",
    "TransportError",
    "UnknownTemplate",
    "enqueue",
    "enqueue_many",
]
