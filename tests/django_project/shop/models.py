"""The shop's one model (no migrations: ``migrate --run-syncdb`` creates its table)."""

from __future__ import annotations

from django.db import models


class Order(models.Model):  # type: ignore[misc]  # Django ships no types
    email = models.EmailField()
    total = models.CharField(max_length=20)

    class Meta:
        app_label = "shop"
