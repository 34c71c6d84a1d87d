"""Every error Outbox raises.

::

    OutboxError                  base; the message defaults to the class docstring
    ├── ConfigError              a missing or invalid setting
    │   └── AttachmentUnavailable  a file enqueue checked is not where the worker looks
    ├── InvalidMessage           enqueue refused the email; nothing was written
    │   ├── InvalidAddress       the recipient (or sender, reply-to) is not a valid address
    │   │   └── SenderNotAllowed  the sender's domain is not one of OUTBOX_SENDER_DOMAINS
    │   ├── HeaderInjection      CR, LF or NUL in a value that reaches a header
    │   ├── UnknownTemplate      no template of that name
    │   ├── MissingParams        the template needs params that were not given
    │   ├── InvalidParams        params are not a JSON object or are too large
    │   ├── InvalidContent       an email without a template lacks its subject or body
    │   ├── InvalidField         a header, tag or metadata entry is not allowed or too large
    │   ├── InvalidKey           the idempotency key is empty, too long or has control characters
    │   └── IdempotencyConflict  the key exists with different content
    ├── StoreError               the database failed (the driver's error is the __cause__)
    │   ├── PoolExhausted        no connection from the pool in time
    │   ├── DuplicateKey         a unique index refused a row (enqueue_many's COPY goes another way)
    │   └── SchemaMissing        the tables are missing or older than this version
    ├── BrokerError              the message broker failed (its error is the __cause__)
    ├── TemplateError            a template could not be rendered
    ├── TransportError           a transport is misconfigured (a refused send is a reply)
    ├── TransportBusy            no send started: the transport is at capacity (not an attempt)
    ├── WebhookError             a webhook body is not an event of its provider
    ├── InvalidRequest           a console form or link asks for something malformed
    └── InvalidCursor            an event feed cursor is not one the feed gave

An SMTP rejection is not an exception: the transport returns a reply and
:func:`outbox.delivery.classify.classify` decides what it means.
"""

from __future__ import annotations


def first_line(error: object) -> str:
    """The first line of an error's text, or its type's name if it has none. A
    database error goes on with its context (``LINE 4: ...``, or ``CONTEXT:`` and
    a trigger's whole SQL): that is for a developer's log, not an operator's line."""
    return (str(error).splitlines() or [type(error).__name__])[0]


class OutboxError(Exception):
    """An Outbox error."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigError(OutboxError):
    """A setting is missing or invalid."""


class AttachmentUnavailable(ConfigError):
    """A file enqueue checked cannot be read where the worker looks for it."""


class InvalidMessage(OutboxError):
    """The email was refused at enqueue; nothing was written."""


class InvalidAddress(InvalidMessage):
    """The recipient is not a valid email address."""


class SenderNotAllowed(InvalidAddress):
    """The sender's domain is not one this installation sends (and signs) for."""


class HeaderInjection(InvalidMessage):
    """A value that reaches a header contains CR, LF or NUL."""


class UnknownTemplate(InvalidMessage):
    """No template of that name exists."""


class MissingParams(InvalidMessage):
    """The template uses params that were not given."""


class InvalidParams(InvalidMessage):
    """The params are not a JSON object, or are too large."""


class InvalidContent(InvalidMessage):
    """An email without a template lacks its subject or body, or they are not valid."""


class InvalidField(InvalidMessage):
    """A header, tag or metadata entry is not allowed, malformed or too large."""


class InvalidKey(InvalidMessage):
    """The idempotency key is empty, too long or contains control characters."""


class IdempotencyConflict(InvalidMessage):
    """The idempotency key was already used for an email with different content."""


class StoreError(OutboxError):
    """The database failed."""


class PoolExhausted(StoreError):
    """No connection came from the pool within its timeout."""


class DuplicateKey(StoreError):
    """A unique index refused a row."""


class SchemaMissing(StoreError):
    """The database has no Outbox tables, or older ones: run `outbox migrate`."""


class BrokerError(OutboxError):
    """The message broker failed."""


class TemplateError(OutboxError):
    """A template could not be rendered."""


class TransportError(OutboxError):
    """A transport is misconfigured."""


class TransportBusy(OutboxError):
    """No send was started: the transport is at capacity. Not an attempt."""

    def __init__(self, reason: str, *, retry_after: float) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class WebhookError(OutboxError, ValueError):
    """The body is not an event of the provider it came for."""


class InvalidRequest(OutboxError):
    """A console request asks for something malformed; nothing was looked up or changed."""


class InvalidCursor(OutboxError):
    """The event feed's cursor is not one the feed gave."""
