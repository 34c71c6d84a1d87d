"""The Django app of Outbox (``INSTALLED_APPS``): its models are Outbox's tables, unmanaged."""

from __future__ import annotations

from django.apps import AppConfig


class OutboxConfig(AppConfig):  # type: ignore[misc]  # Django ships no types
    name = "outbox.django"
    label = "outbox"
    verbose_name = "Outbox"

    def ready(self) -> None:
        from django.conf import settings  # noqa: PLC0415
        from django.core import checks  # noqa: PLC0415

        from outbox.django import project_settings, system_checks  # noqa: PLC0415

        system_checks.LOADING[:] = project_settings.apply(settings)
        checks.register(system_checks.outbox_settings)
