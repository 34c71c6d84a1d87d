"""The configured project's mail, run as its own process: prints one JSON object per row.

``python -m tests.django_project.priority_scenario``: Django's password reset
through its own view and form, a plain ``send_mail``, one inside
``high_priority()`` and one with an ``X-Outbox-Priority`` header. The test
reads the rows' priority, sender and Message-ID from what is printed.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django_project.configured")


def main() -> None:
    import django  # noqa: PLC0415

    django.setup()
    from django.contrib.auth.models import User  # noqa: PLC0415
    from django.core import mail  # noqa: PLC0415
    from django.core.management import call_command  # noqa: PLC0415
    from django.db import connection  # noqa: PLC0415
    from django.test import Client  # noqa: PLC0415

    import outbox.django  # noqa: PLC0415

    call_command("migrate", verbosity=0)
    call_command("outbox_migrate")
    User.objects.create_user("alice", "alice@example.com", "an-old-password-1")
    answer = Client().post("/password_reset/", {"email": "alice@example.com"})
    assert answer.status_code == 302, answer.status_code  # sent, on to "done"
    mail.send_mail("Our news", "text", None, ["news@example.com"])
    with outbox.django.high_priority():
        mail.send_mail("Your code", "123456", None, ["code@example.com"])
    marked = mail.EmailMessage(
        "Sign-in alert", "text", to=["alert@example.com"], headers={"X-Outbox-Priority": "high"}
    )
    marked.send()
    with connection.cursor() as cur:
        cur.execute("SELECT recipient, priority, sender, subject, message_id FROM email_outbox")
        names = [c[0] for c in cur.description]
        for row in cur.fetchall():
            print(json.dumps(dict(zip(names, row, strict=True))))


if __name__ == "__main__":
    main()
