"""outbox.django in a real Django project on the real Postgres, both of Django's drivers.

Each backend runs in a process of its own (Django binds its driver once);
tests/django_project/scenario.py holds the steps and their assertions. What its
send_mail calls enqueued is then delivered to an SMTP server on loopback and
read back as the recipients get it.
"""

from __future__ import annotations

import dataclasses
import email
import email.policy
import os
import subprocess
import sys
import uuid
from email.message import EmailMessage
from pathlib import Path

import psycopg
import pytest

from outbox.config import Settings
from tests.conftest import ADMIN_URL
from tests.integration.helpers import harness

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("backend", ["psycopg", "psycopg2"])
def test_a_django_project_enqueues_in_its_transactions(settings: Settings, backend: str) -> None:
    name = f"outbox_django_{uuid.uuid4().hex[:8]}"  # empty: outbox_migrate creates the tables
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        env = {**os.environ, "OUTBOX_TEST_DJANGO_DB": name}
        run = subprocess.run(
            [sys.executable, "-m", "tests.django_project.scenario", backend],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        assert run.stdout.strip().splitlines()[-1] == f"OK {backend}"
        assert "applied 0001_outbox" in run.stdout
        if backend == "psycopg":  # the rows are the same on both: delivered once
            check_delivered(dataclasses.replace(settings, database_url=database_url(name)))
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def database_url(name: str) -> str:
    return ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


def check_delivered(settings: Settings) -> None:
    """What the scenario's send_mail enqueued, delivered to a real SMTP server on loopback."""
    with harness(settings) as (h, sink):
        h.run()
    by_key = {}
    with psycopg.connect(settings.database_url) as conn:
        ids = dict(conn.execute("SELECT message_id, idempotency_key FROM email_outbox").fetchall())
    for received in sink.messages:
        message = email.message_from_bytes(received.data, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        by_key[ids[message["Message-ID"]]] = (received, message)
    received, invoice = by_key["invoice-7"]
    assert sorted(received.recipients) == [
        "audit@example.com", "dave@example.com", "erin@example.com"
    ]  # fmt: skip
    assert invoice["From"] == "Billing <billing@outbox.localhost>"
    assert invoice["To"] == "dave@example.com"
    assert invoice["Cc"] == "erin@example.com"
    assert invoice["Bcc"] is None  # bcc travels in the envelope only
    assert invoice["Reply-To"] == "help@example.net"
    assert invoice["X-Campaign"] == "spring"
    assert invoice["Subject"] == "Your invoice"
    text = invoice.get_body(("plain",))
    html = invoice.get_body(("html",))
    assert text is not None
    assert html is not None
    assert text.get_content().strip() == "Plain text"
    assert "<p>HTML</p>" in html.get_content()
    (attached,) = list(invoice.iter_attachments())
    assert attached.get_filename() == "invoice.txt"
    assert attached.get_content_type() == "text/plain"
    assert attached.get_payload(decode=True) == b"total: 7"
    received, plain = by_key[
        next(k for k, (r, _) in by_key.items() if "carol@example.com" in r.recipients)
    ]
    assert plain["From"] == "Shop <shop@outbox.localhost>"
    assert plain["Subject"] == "Hello"
