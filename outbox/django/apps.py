"""The Django app of Outbox (``INSTALLED_APPS``): its models are Outbox's tables, unmanaged."""

from __future__ import annotations

from django.apps import AppConfig


class OutboxConfig(AppConfig):  # type: ignore[misc]  # Django ships no types
    name = "outbox.django"
    label = "outbox"
    verbose_name = "Outbox"
