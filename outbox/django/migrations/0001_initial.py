"""Outbox's tables as unmanaged models: this migration creates, changes and drops nothing."""

from __future__ import annotations

import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):  # type: ignore[misc]  # Django ships no types
    initial = True

    dependencies: list[tuple[str, str]] = []

    operations = [
        migrations.CreateModel(
            name="AuditEntry",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("at", models.DateTimeField()),
                ("actor", models.TextField()),
                ("role", models.TextField()),
                ("action", models.TextField()),
                ("target", models.TextField(null=True)),
                ("reason", models.TextField()),
                ("detail", models.JSONField()),
            ],
            options={
                "verbose_name": "audit entry",
                "verbose_name_plural": "audit trail",
                "db_table": "console_audit",
                "ordering": ["-id"],
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="Email",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("idempotency_key", models.TextField()),
                ("recipient", models.TextField()),
                ("template", models.TextField()),
                ("message_id", models.TextField()),
                ("priority", models.TextField(choices=[("high", "high"), ("bulk", "bulk")])),
                (
                    "status",
                    models.TextField(
                        choices=[
                            ("pending", "pending"),
                            ("queued", "queued"),
                            ("sending", "sending"),
                            ("sent", "sent"),
                            ("failed", "failed"),
                            ("dead", "dead"),
                            ("held", "held"),
                            ("suppressed", "suppressed"),
                            ("cancelled", "cancelled"),
                        ]
                    ),
                ),
                ("status_reason", models.TextField(null=True)),
                ("attempts", models.IntegerField()),
                ("last_error", models.TextField(null=True)),
                ("provider_message_id", models.TextField(null=True)),
                ("created_at", models.DateTimeField()),
                ("sent_at", models.DateTimeField(null=True)),
                ("failed_at", models.DateTimeField(null=True)),
                ("send_at", models.DateTimeField(null=True)),
                ("sender", models.TextField(null=True)),
                ("subject", models.TextField(null=True)),
                (
                    "reply_to",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.TextField(), null=True, size=None
                    ),
                ),
                (
                    "cc",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.TextField(), null=True, size=None
                    ),
                ),
                (
                    "bcc",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.TextField(), null=True, size=None
                    ),
                ),
                (
                    "tags",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.TextField(), null=True, size=None
                    ),
                ),
                ("headers", models.JSONField(null=True)),
                ("metadata", models.JSONField(null=True)),
                ("locale", models.TextField(null=True)),
                ("bounce_class", models.TextField(null=True)),
            ],
            options={
                "verbose_name": "email",
                "db_table": "email_outbox",
                "ordering": ["-id"],
                "permissions": [("reveal_address", "Can see recipients' addresses in clear")],
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="Suppression",
            fields=[
                ("address", models.TextField(primary_key=True, serialize=False)),
                ("scope", models.TextField()),
                ("reason", models.TextField()),
                ("detail", models.TextField(null=True)),
                ("created_at", models.DateTimeField()),
            ],
            options={
                "db_table": "email_suppression",
                "ordering": ["-created_at"],
                "managed": False,
            },
        ),
    ]
