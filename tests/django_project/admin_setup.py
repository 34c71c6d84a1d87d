"""Set up the admin test project's database: Outbox's tables by ``outbox_migrate``,
then Django's own by ``migrate``, which must leave every Outbox table as it was;
then two users. ``python -m tests.django_project.admin_setup``; the last line is OK.
"""

from __future__ import annotations

import io
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django_project.admin_settings")

# Every column, index and constraint of Outbox's tables, as the catalogue has them.
SHAPE = """
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
WHERE c.relname = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT t.relname, i.relname, pg_get_indexdef(i.oid), true
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
WHERE t.relname = ANY(%s)
UNION ALL
SELECT t.relname, k.conname, pg_get_constraintdef(k.oid), true
FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid WHERE t.relname = ANY(%s)
ORDER BY 1, 2, 3
"""


def shape() -> list[tuple[object, ...]]:
    from django.db import connection  # noqa: PLC0415

    from outbox.db.sql.schema import TABLES  # noqa: PLC0415

    tables = sorted(TABLES)
    with connection.cursor() as cur:
        cur.execute(SHAPE, [tables, tables, tables])
        return list(cur.fetchall())


def main() -> None:
    import django  # noqa: PLC0415

    django.setup()
    from django.contrib.auth.models import Permission, User  # noqa: PLC0415
    from django.core.management import call_command  # noqa: PLC0415

    call_command("outbox_migrate")
    before = shape()
    assert before
    planned = io.StringIO()
    call_command("sqlmigrate", "outbox", "0001", stdout=planned)
    statements = [
        line for line in planned.getvalue().splitlines() if line and not line.startswith("--")
    ]
    assert statements == ["BEGIN;", "COMMIT;"], planned.getvalue()  # no SQL at all
    call_command("migrate", verbosity=0)
    assert shape() == before, "Django's migrations changed an Outbox table"
    call_command("makemigrations", "outbox", "--check", "--dry-run", verbosity=0)  # exits 1 else

    User.objects.create_superuser("root", "", "root-password-1")  # every permission: reveals
    support = User.objects.create_user("support", "", "support-password-1", is_staff=True)
    wanted = ["view_email", "change_email", "view_suppression", "change_suppression",
              "view_auditentry"]  # fmt: skip
    support.user_permissions.set(
        Permission.objects.filter(content_type__app_label="outbox", codename__in=wanted)
    )
    assert Permission.objects.filter(codename="reveal_address").exists()
    assert not support.has_perm("outbox.reveal_address")
    print("OK")


if __name__ == "__main__":
    main()
