"""Delivered messages as a mail client sees them: parts, attachments, no injection."""

from __future__ import annotations

import dataclasses
import email
import email.policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import psycopg
import pytest

from outbox import HeaderInjection, InvalidParams, enqueue
from outbox.config import Settings
from tests.integration.helpers import query, statuses
from tests.integration.test_delivery import harness

INVOICE = {
    "name": "Alice",
    "product": "Shop",
    "invoice_number": "INV-1234",
    "amount": "20.00",
    "due_date": "2026-12-31",
    "invoice_url": "https://shop.example/invoices/1234",
}


def send(settings: Settings, template: str, params: dict[str, Any], key: str = "k") -> EmailMessage:
    with psycopg.connect(settings.database_url) as conn:
        enqueue(
            conn,
            idempotency_key=key,
            to="alice@example.com",
            template=template,
            params=params,
            settings=settings,
        )
        conn.commit()
    with harness(settings) as (h, sink):
        h.run()
    (received,) = sink.messages
    message = email.message_from_bytes(received.data, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    assert message.defects == []
    return message


def test_an_invoice_with_its_pdf(settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "invoices").mkdir()
    pdf = b"%PDF-1.4\n" + bytes(range(256)) * 100
    (tmp_path / "invoices" / "1234.pdf").write_bytes(pdf)
    settings = dataclasses.replace(settings, attachments_dir=str(tmp_path))
    attachment = {"path": "invoices/1234.pdf", "filename": "Invoice-1234.pdf"}
    message = send(settings, "invoice", {**INVOICE, "attachments": [attachment]})
    assert message.get_content_type() == "multipart/mixed"
    alternative, attached = message.iter_parts()
    assert [p.get_content_type() for p in alternative.iter_parts()] == ["text/plain", "text/html"]
    assert attached.get_filename() == "Invoice-1234.pdf"
    assert attached.get_content_type() == "application/pdf"
    assert attached.get_content() == pdf
    assert message["Subject"] == "Invoice INV-1234 from Shop"


@pytest.mark.parametrize(
    ("attachment", "message"),
    [
        ({"path": "../etc/passwd"}, "outside"),
        ({"path": "invoices/none.pdf"}, "no file"),
        ({"path": "invoices/big.pdf"}, "over the limit"),
    ],
)
def test_bad_attachments_are_refused_at_enqueue(
    settings: Settings, tmp_path: Path, attachment: dict[str, str], message: str
) -> None:
    (tmp_path / "invoices").mkdir()
    (tmp_path / "invoices" / "big.pdf").write_bytes(b"x" * 2000)
    settings = dataclasses.replace(
        settings, attachments_dir=str(tmp_path), max_attachment_bytes=1000
    )
    with (
        psycopg.connect(settings.database_url) as conn,
        pytest.raises(InvalidParams, match=message),
    ):
        enqueue(
            conn,
            idempotency_key="k",
            to="a@example.com",
            template="invoice",
            params={**INVOICE, "attachments": [attachment]},
            settings=settings,
        )
    assert statuses(settings) == {}


def test_text_only_template(settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "subject.txt").write_text("Plain {{ n }}")
    (tmp_path / "plain" / "body.txt").write_text("Just text, {{ n }}.\n")
    settings = dataclasses.replace(settings, templates=tmp_path)
    message = send(settings, "plain", {"n": "ünïcode"})
    assert message.get_content_type() == "text/plain"
    assert message.get_content().replace("\r\n", "\n") == "Just text, ünïcode.\n"
    assert message["Subject"] == "Plain ünïcode"


def test_params_cannot_inject_markup_or_headers(settings: Settings) -> None:
    evil = '<a href="https://evil.example">x</a>"><script>alert(1)</script>\r\nBcc: x@evil.example'
    message = send(
        settings,
        "newsletter",
        {"name": evil, "title": "News", "intro": evil, "url": 'https://shop.example/"><b>'},
    )
    html = message.get_body(("html",))
    text = message.get_body(("plain",))
    assert html is not None
    assert text is not None
    content = html.get_content()
    assert "<script>" not in content
    assert 'evil.example">' not in content
    assert "&lt;script&gt;" in content
    assert "<b>" not in content
    assert "<script>alert(1)</script>" in text.get_content()  # plain text shows it as written
    assert message["Bcc"] is None
    assert sorted(k.lower() for k in message) == [
        "content-type",
        "date",
        "from",
        "message-id",
        "mime-version",
        "subject",
        "to",
    ]
    with psycopg.connect(settings.database_url) as conn, pytest.raises(HeaderInjection):
        enqueue(
            conn,
            idempotency_key="k2",
            to="a@example.com",
            template="newsletter",
            params={"name": "A", "title": evil, "intro": "I", "url": "https://x.example"},
            settings=settings,
        )
    assert query(settings, "SELECT count(*) FROM email_outbox") == [(1,)]


@pytest.mark.parametrize("worker_dir", ["", "elsewhere"])
def test_a_worker_that_cannot_see_the_attachment_waits_without_an_attempt(
    settings: Settings, tmp_path: Path, worker_dir: str
) -> None:
    # The application saw the file at enqueue; a worker with no (or another)
    # OUTBOX_ATTACHMENTS_DIR must not spend the email's attempts, nor kill it.
    (tmp_path / "app" / "invoices").mkdir(parents=True)
    (tmp_path / "app" / "invoices" / "1234.pdf").write_bytes(b"%PDF-1.4\n")
    (tmp_path / "elsewhere").mkdir()
    app = dataclasses.replace(settings, attachments_dir=str(tmp_path / "app"))
    attachment = {"path": "invoices/1234.pdf"}
    with psycopg.connect(settings.database_url) as conn:
        enqueue(
            conn,
            idempotency_key="invoice-1234",
            to="alice@example.com",
            template="invoice",
            params={**INVOICE, "attachments": [attachment]},
            settings=app,
        )
        conn.commit()
    worker = dataclasses.replace(
        settings, attachments_dir=str(tmp_path / worker_dir) if worker_dir else ""
    )
    with harness(worker) as (h, sink):
        h.relay.run_round()
        while h.groups:
            h.delivery.deliver(h.groups.pop(0))
    assert sink.messages == []
    ((status, attempts, reason, wait),) = query(
        settings,
        "SELECT status, attempts, status_reason, next_attempt_at > now() + interval '30 seconds'"
        " FROM email_outbox",
    )
    assert (status, attempts, wait) == ("pending", 0, True)
    assert reason.startswith("waiting for its attachment")
    assert query(settings, "SELECT count(*) FROM email_attempt") == [(0,)]
