"""Outbox's own tables as Django models, for the admin (:mod:`outbox.django.admin`).

Every model is unmanaged (``managed = False``): Django's migrations never
create, change or drop an Outbox table; ``manage.py outbox_migrate`` does.
Nothing here writes: the admin reads through these models and acts through
Outbox's store functions, as the console does.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

STATUSES = [
    (s, s)
    for s in (
        "pending", "queued", "sending", "sent", "failed", "dead", "held", "suppressed", "cancelled"
    )
]  # fmt: skip
PRIORITIES = [("high", "high"), ("bulk", "bulk")]


class Email(models.Model):  # type: ignore[misc]  # Django ships no types
    id = models.BigAutoField(primary_key=True)
    idempotency_key = models.TextField()
    recipient = models.TextField()
    template = models.TextField()
    message_id = models.TextField()
    priority = models.TextField(choices=PRIORITIES)
    status = models.TextField(choices=STATUSES)
    status_reason = models.TextField(null=True)
    attempts = models.IntegerField()
    last_error = models.TextField(null=True)
    provider_message_id = models.TextField(null=True)
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True)
    failed_at = models.DateTimeField(null=True)
    send_at = models.DateTimeField(null=True)
    sender = models.TextField(null=True)
    subject = models.TextField(null=True)
    reply_to = ArrayField(models.TextField(), null=True)
    cc = ArrayField(models.TextField(), null=True)
    bcc = ArrayField(models.TextField(), null=True)
    tags = ArrayField(models.TextField(), null=True)
    headers = models.JSONField(null=True)
    metadata = models.JSONField(null=True)
    locale = models.TextField(null=True)
    bounce_class = models.TextField(null=True)

    class Meta:
        managed = False
        db_table = "email_outbox"
        ordering = ["-id"]
        verbose_name = "email"
        permissions = [("reveal_address", "Can see recipients' addresses in clear")]

    def __str__(self) -> str:
        return f"email {self.id}"


class Suppression(models.Model):  # type: ignore[misc]
    address = models.TextField(primary_key=True)
    scope = models.TextField()
    reason = models.TextField()
    detail = models.TextField(null=True)
    created_at = models.DateTimeField()

    class Meta:
        managed = False
        db_table = "email_suppression"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"suppression ({self.scope})"


class AuditEntry(models.Model):  # type: ignore[misc]
    id = models.BigAutoField(primary_key=True)
    at = models.DateTimeField()
    actor = models.TextField()
    role = models.TextField()
    action = models.TextField()
    target = models.TextField(null=True)
    reason = models.TextField()
    detail = models.JSONField()

    class Meta:
        managed = False
        db_table = "console_audit"
        ordering = ["-id"]
        verbose_name = "audit entry"
        verbose_name_plural = "audit trail"

    def __str__(self) -> str:
        return f"{self.action} by {self.actor}"
