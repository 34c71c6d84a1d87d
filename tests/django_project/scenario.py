"""What a Django project does with outbox.django, run as its own process per backend.

``python -m tests.django_project.scenario psycopg|psycopg2``: Django picks
psycopg 3 when it can import it, so for psycopg2 the import is refused while
Django loads its backend (Outbox itself still uses psycopg 3 for its own
connections). Every step asserts; the last line says which driver ran.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django_project.settings")


def load_django(backend: str) -> None:
    import django  # noqa: PLC0415

    blocked = {}
    if backend == "psycopg2":
        blocked = {
            n: m for n, m in sys.modules.items() if n == "psycopg" or n.startswith("psycopg.")
        }
        for name in blocked:
            del sys.modules[name]
        sys.modules["psycopg"] = None  # type: ignore[assignment]  # import fails: psycopg2
    django.setup()
    import django.db.backends.postgresql.base  # noqa: PLC0415  # binds the driver now

    if backend == "psycopg2":
        del sys.modules["psycopg"]
        sys.modules.update(blocked)


def count(where: str = "true") -> int:
    from django.db import connection  # noqa: PLC0415

    with connection.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM email_outbox WHERE {where}")
        return int(cur.fetchone()[0])


def purge_everything() -> None:
    """Every email sent 40 days ago, then purged: only the tombstones stay."""
    import datetime as dt  # noqa: PLC0415

    from django.db import connection  # noqa: PLC0415

    from outbox.db.store import connections, data_retention  # noqa: PLC0415

    with connection.cursor() as cur:
        cur.execute(
            "UPDATE email_outbox SET status = 'sent', sent_at = now() - interval '40 days',"
            " created_at = now() - interval '40 days'"
        )
    db = connection.settings_dict
    with connections.connect_params(dbname=db["NAME"], user=db["USER"], host=db["HOST"]) as own:
        data_retention.purge(own, before=dt.datetime.now(dt.UTC) - dt.timedelta(days=30))


def rows(where: str) -> list[dict[str, object]]:
    from django.db import connection  # noqa: PLC0415

    with connection.cursor() as cur:
        cur.execute(
            "SELECT id, template, sender, reply_to, cc, bcc, headers::text, subject, body_text,"
            f" body_html, attachments::text FROM email_outbox WHERE {where} ORDER BY id"
        )
        names = [c[0] for c in cur.description]
        found = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    for row in found:  # jsonb as text: each driver decodes it its own way otherwise
        for name in ("headers", "attachments"):
            row[name] = json.loads(row[name]) if row[name] else None
    return found


LOGIN = {"name": "Alice", "code": "123456", "product": "Shop", "minutes": 10}
NEWS = {"name": "R", "title": "News", "intro": "Hi", "url": "https://x.example"}


class Undo(Exception):
    pass


def main(backend: str) -> None:
    load_django(backend)
    from django.core import mail  # noqa: PLC0415
    from django.core.management import call_command  # noqa: PLC0415
    from django.db import connection, connections, transaction  # noqa: PLC0415

    import outbox  # noqa: PLC0415
    import outbox.django  # noqa: PLC0415
    from outbox.errors import InvalidAddress, InvalidMessage  # noqa: PLC0415

    call_command("outbox_migrate")
    connection.ensure_connection()
    driver = type(connection.connection).__module__.split(".")[0]
    assert driver == backend, driver

    def login(key: str, **kw: object) -> object:
        args = {"to": "alice@example.com", "template": "login_code", "params": LOGIN, **kw}
        return outbox.django.enqueue(idempotency_key=key, **args)

    try:
        with transaction.atomic():
            login("rolled-back")
            assert count() == 1  # visible inside the transaction
            raise Undo
    except Undo:
        pass
    assert count() == 0
    with transaction.atomic():
        first = login("kept")
        try:
            with transaction.atomic():  # a savepoint
                login("in-savepoint")
                outbox.django.enqueue_many(
                    [{"idempotency_key": f"sp-{i}", "to": f"s{i}@example.com",
                      "template": "newsletter", "params": NEWS} for i in range(3)]
                )  # fmt: skip
                raise Undo
        except Undo:
            pass
        try:
            with transaction.atomic():
                login("bad", to="not-an-address")
        except InvalidAddress:
            pass
    assert count() == 1
    again = login("kept")
    assert not again.created
    assert (again.id, again.message_id) == (first.id, first.message_id)
    with transaction.atomic():
        many = outbox.django.enqueue_many(
            [{"idempotency_key": f"nl-{i}", "to": f"r{i}@example.com",
              "template": "newsletter", "params": NEWS} for i in range(50)]
        )  # fmt: skip
    assert [r.created for r in many] == [True] * 50
    assert count("idempotency_key LIKE 'nl-%'") == 50

    # Cancelled on Django's connection, in its transaction, with the key alone.
    login("to-cancel", send_at=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    try:
        with transaction.atomic():
            assert outbox.cancel(connections["default"], "to-cancel")
            raise Undo
    except Undo:
        pass
    assert count("idempotency_key = 'to-cancel' AND status = 'pending'") == 1
    with transaction.atomic():
        assert outbox.django.cancel("to-cancel", reason="order refunded")
    with connection.cursor() as cur:
        cur.execute(
            "SELECT e.reason, e.actor FROM email_event e JOIN email_outbox o"
            " ON o.id = e.outbox_id WHERE o.idempotency_key = 'to-cancel'"
        )
        assert cur.fetchall() == [("cancelled: order refunded", "application")]
    with connection.cursor() as cur:
        cur.execute("DELETE FROM email_outbox WHERE idempotency_key = 'to-cancel'")

    # A purged email's key stays taken, on both of enqueue's ways.
    purge_everything()
    again = login("kept")
    assert (again.created, again.status) == (False, "purged"), again
    assert (again.id, again.message_id) == (first.id, first.message_id)
    with transaction.atomic():
        after = outbox.django.enqueue_many(
            [{"idempotency_key": f"nl-{i}", "to": f"r{i}@example.com",
              "template": "newsletter", "params": NEWS} for i in range(51)]
        )  # fmt: skip
    assert [r.status for r in after] == ["purged"] * 50 + ["pending"]
    assert [r.message_id for r in after[:50]] == [r.message_id for r in many]
    assert count() == 1

    # send_mail through EMAIL_BACKEND: a template named in headers, in the transaction.
    headers = {
        "Idempotency-Key": "welcome-1",
        "X-Outbox-Template": "login_code",
        "X-Outbox-Params": json.dumps(LOGIN),
    }
    message = mail.EmailMessage("", "", to=["bob@example.com"], headers=headers)
    try:
        with transaction.atomic():
            assert message.send() == 1
            assert count("idempotency_key = 'welcome-1'") == 1
            raise Undo
    except Undo:
        pass
    assert count("idempotency_key = 'welcome-1'") == 0
    assert message.send() == 1
    assert message.send() == 1  # the same key: still one email
    assert count("idempotency_key = 'welcome-1' AND recipient = 'bob@example.com'") == 1
    # A plain send_mail: from DEFAULT_FROM_EMAIL, the From when OUTBOX_FROM is unset.
    assert mail.send_mail("Hello", "free-form text", None, ["carol@example.com"]) == 1
    (plain,) = rows("recipient = 'carol@example.com'")
    assert (plain["template"], plain["subject"], plain["body_text"]) == (
        "(inline)",
        "Hello",
        "free-form text",
    )
    assert plain["sender"] == "Shop <shop@outbox.localhost>", plain["sender"]

    # Everything a Django message carries arrives as given.
    full = mail.EmailMultiAlternatives(
        "Your invoice",
        "Plain text",
        "Billing <billing@outbox.localhost>",
        ["dave@example.com"],
        cc=["erin@example.com"],
        bcc=["audit@example.com"],
        reply_to=["help@example.net"],
        headers={"Idempotency-Key": "invoice-7", "X-Campaign": "spring"},
    )
    full.attach_alternative("<p>HTML</p>", "text/html")
    full.attach("invoice.txt", "total: 7", "text/plain")
    assert full.send() == 1
    (row,) = rows("idempotency_key = 'invoice-7'")
    assert row["sender"] == "Billing <billing@outbox.localhost>"
    assert (row["reply_to"], row["cc"], row["bcc"]) == (
        ["help@example.net"],
        ["erin@example.com"],
        ["audit@example.com"],
    )
    assert row["headers"] == [["X-Campaign", "spring"]], row["headers"]
    assert (row["subject"], row["body_text"], row["body_html"]) == (
        "Your invoice",
        "Plain text",
        "<p>HTML</p>",
    )
    assert [(a["filename"], a["content_type"], a["size"]) for a in row["attachments"]] == [
        ("invoice.txt", "text/plain", 8)
    ]
    with connection.cursor() as cur:
        cur.execute(
            "SELECT b.content FROM email_attachment_use u JOIN email_attachment_blob b "
            "USING (sha256) WHERE u.outbox_id = %s",
            [row["id"]],
        )
        assert bytes(cur.fetchone()[0]) == b"total: 7"

    # A sender outside OUTBOX_SENDER_DOMAINS is refused, and writes nothing.
    refused = ""
    try:
        mail.send_mail("Hello", "text", "x@elsewhere.example", ["frank@example.com"])
    except InvalidMessage as exc:
        refused = str(exc)
    assert "OUTBOX_SENDER_DOMAINS" in refused, refused
    assert mail.send_mail("Hello", "t", "x@elsewhere.example", ["c@example.com"], True) == 0
    assert count("recipient IN ('frank@example.com', 'c@example.com')") == 0
    print(f"OK {driver}")


if __name__ == "__main__":
    main(sys.argv[1])
