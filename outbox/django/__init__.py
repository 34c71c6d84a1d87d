"""Outbox in a Django project: ``INSTALLED_APPS += ["outbox.django"]``.

:func:`enqueue`, :func:`enqueue_many` and :func:`cancel` write on Django's own connection, in
the current ``transaction.atomic`` block (outside one, Django's autocommit
applies: the email is committed at once). ``manage.py outbox_migrate``
creates or updates Outbox's tables; ``EMAIL_BACKEND =
"outbox.django.EmailBackend"`` routes ``send_mail`` through the outbox;
:func:`high_priority` and ``PriorityMiddleware`` put mail on the high queue.
Settings may be given in ``settings.OUTBOX`` (:mod:`outbox.django.project_settings`),
and ``manage.py check`` runs Outbox's preflight.
Both the psycopg 3 and the psycopg2 backends of Django work.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from outbox import cancelling, intake

# Nothing is imported until used: Django loads this app before it binds its
# database driver, and the app must not choose it.

__all__ = [
    "EmailBackend",
    "PriorityMiddleware",
    "cancel",
    "enqueue",
    "enqueue_many",
    "high_priority",
]


def enqueue(*, using: str | None = None, **kwargs: Any) -> intake.Enqueued:
    """:func:`outbox.enqueue` on Django's connection ``using`` (default: ``default``)."""
    from django.db import DEFAULT_DB_ALIAS, connections  # noqa: PLC0415

    from outbox import intake  # noqa: PLC0415

    return intake.enqueue(connections[using or DEFAULT_DB_ALIAS], **kwargs)


def enqueue_many(
    emails: Iterable[Mapping[str, Any]], *, using: str | None = None, **kwargs: Any
) -> list[intake.Enqueued]:
    """:func:`outbox.enqueue_many` on Django's connection ``using``."""
    from django.db import DEFAULT_DB_ALIAS, connections  # noqa: PLC0415

    from outbox import intake  # noqa: PLC0415

    return intake.enqueue_many(connections[using or DEFAULT_DB_ALIAS], emails, **kwargs)


def cancel(
    idempotency_key: str,
    *,
    using: str | None = None,
    reason: str | None = None,
    by: str | None = None,
) -> cancelling.Cancellation:
    """:func:`outbox.cancel` on Django's connection ``using``."""
    from django.db import DEFAULT_DB_ALIAS, connections  # noqa: PLC0415

    from outbox import cancelling  # noqa: PLC0415

    conn = connections[using or DEFAULT_DB_ALIAS]
    return cancelling.cancel(conn, idempotency_key, reason=reason, by=by)


def __getattr__(name: str) -> Any:
    if name == "EmailBackend":  # imported on use: it needs Django's settings
        from outbox.django.email_backend import EmailBackend  # noqa: PLC0415

        return EmailBackend
    if name in ("PriorityMiddleware", "high_priority"):
        from outbox.django import priority  # noqa: PLC0415

        return getattr(priority, name)
    raise AttributeError(f"module 'outbox.django' has no attribute {name!r}")
