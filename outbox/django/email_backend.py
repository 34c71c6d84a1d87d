"""``EMAIL_BACKEND = "outbox.django.EmailBackend"``: Django's ``send_mail`` into the outbox.

Each message is enqueued on Django's connection (``OUTBOX_DATABASE_ALIAS``, else
``default``) in the current ``transaction.atomic`` block: mail sent in a view
that rolls back is never sent. The mapping is :mod:`outbox.django.message_mapping`;
the queue a message goes on, :mod:`outbox.django.priority`.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from django.conf import settings as django_settings
from django.core.mail.backends.base import BaseEmailBackend
from django.db import DEFAULT_DB_ALIAS, connections

from outbox import intake
from outbox.django import priority
from outbox.django.message_mapping import enqueue_arguments, supported
from outbox.errors import InvalidMessage, OutboxError

ACCEPTED = frozenset(
    name
    for name, p in inspect.signature(intake.enqueue).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "settings"
)


class EmailBackend(BaseEmailBackend):  # type: ignore[misc]  # Django ships no types
    def __init__(self, fail_silently: bool = False, using: str | None = None, **kwargs: Any):
        super().__init__(fail_silently=fail_silently, **kwargs)
        self.using = using or DEFAULT_DB_ALIAS

    def send_messages(self, email_messages: Sequence[Any]) -> int:
        if not email_messages:
            return 0
        default_from = getattr(django_settings, "DEFAULT_FROM_EMAIL", None)
        try:
            emails = []
            for message in email_messages:
                for email in enqueue_arguments(message, default_from=default_from):
                    if "priority" not in email and priority.current():
                        email["priority"] = priority.current()  # marked by the sending code
                    kept, lost = supported(email, ACCEPTED)
                    if lost:
                        raise InvalidMessage(f"this Outbox cannot take {', '.join(lost)}")
                    emails.append(kept)
            intake.enqueue_many(connections[self.using], emails)
        except OutboxError:
            if not self.fail_silently:
                raise
            return 0
        return len(email_messages)
