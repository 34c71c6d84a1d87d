"""Outbox in a real Django project's admin, driven in Debian's Chromium.

The project (tests/django_project, admin_settings) gets Outbox's tables from
``outbox_migrate`` and its own from ``migrate``, which must change no Outbox
table; `manage.py runserver` serves it on loopback. Support finds an email
by address, key, Message-ID and provider id, sees tags instead of addresses,
and requeues, cancels, suppresses and unsuppresses, each audited with the
Django user; a user with ``outbox.reveal_address`` sees addresses in clear.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from playwright.sync_api import Browser, Page

from outbox import enqueue
from outbox.config import Settings
from outbox.redact import recipient_tag
from tests.conftest import ADMIN_URL
from tests.integration.helpers import LOGIN, query, wait_until
from tests.integration.test_console import make_dead
from tests.integration.test_console_browser import browser  # noqa: F401  # the fixture
from tests.keys import SECRET

pytestmark = pytest.mark.chromium

ROOT = Path(__file__).resolve().parents[2]
DAVE = "dave.dead@example.com"
ERIN = "erin.later@example.com"
SUPPORT = ("support", "support-password-1")
SUPERUSER = ("root", "root-password-1")


@dataclasses.dataclass
class Project:
    settings: Settings  # Outbox's, on the project's database
    url: str  # the running project


@pytest.fixture
def project(settings: Settings) -> Iterator[Project]:
    name = f"outbox_admin_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
    env = {
        **os.environ,
        "OUTBOX_TEST_DJANGO_DB": name,
        "OUTBOX_SECRET": SECRET,
        "DJANGO_SETTINGS_MODULE": "tests.django_project.admin_settings",
    }
    server = None
    try:
        setup = subprocess.run(
            [sys.executable, "-m", "tests.django_project.admin_setup"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert setup.returncode == 0, setup.stdout + setup.stderr
        assert setup.stdout.strip().splitlines()[-1] == "OK"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = subprocess.Popen(
            [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{port}", "--noreload"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            if server.poll() is not None:
                raise AssertionError(f"runserver exited: {server.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                return httpx.get(f"{url}/admin/login/", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(up, timeout=60)
        own = dataclasses.replace(
            settings, database_url=ADMIN_URL.rsplit("/", 1)[0] + f"/{name}", secret=SECRET,
            max_attempts=1,
        )  # fmt: skip
        yield Project(own, url)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=20)
            assert server.stderr is not None
            server.stderr.close()
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def sign_in(browser: Browser, project: Project, user: tuple[str, str]) -> Page:  # noqa: F811
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(f"{project.url}/admin/login/")
    page.fill("input[name=username]", user[0])
    page.fill("input[name=password]", user[1])
    page.click("input[type=submit]")
    page.wait_for_selector("#content")
    return page


def search(page: Page, project: Project, text: str) -> str:
    page.goto(f"{project.url}/admin/outbox/email/")
    page.fill("#searchbar", text)
    page.press("#searchbar", "Enter")
    page.wait_for_load_state()
    return page.inner_text("#result_list") if page.locator("#result_list").count() else ""


def act(page: Page, action: str, reason: str) -> str:
    """Select every row shown, run ``action`` with ``reason``; the messages."""
    for box in page.locator("input.action-select").all():  # the rows (no admin script here)
        box.check()
    page.select_option("select[name=action]", action)
    page.fill("input[name=reason]", reason)
    page.click("button[name=index]")
    page.wait_for_load_state()
    return page.inner_text("ul.messagelist")


def audit(settings: Settings) -> list[tuple[object, ...]]:
    return query(settings, "SELECT actor, role, action, reason FROM console_audit ORDER BY id")


def test_support_finds_and_acts_on_emails_in_the_django_admin(
    browser: Browser,  # noqa: F811
    project: Project,
) -> None:
    s = project.settings
    dead = make_dead(s, f"pw-{DAVE}", DAVE)
    with psycopg.connect(s.database_url) as conn:
        later = enqueue(
            conn, idempotency_key="reminder-9", to=ERIN, template="login_code", params=LOGIN,
            send_at=dt.datetime.now(dt.UTC) + dt.timedelta(hours=3), tags=["reminder"],
            settings=s,
        )  # fmt: skip
    message_id = query(s, "SELECT message_id FROM email_outbox WHERE id = %s", dead)[0][0]
    query(s, "UPDATE email_outbox SET provider_message_id = 'prov-77' WHERE id = %s RETURNING id",
          dead)  # fmt: skip
    page = sign_in(browser, project, SUPPORT)
    dave_tag = recipient_tag(DAVE, secret=SECRET)
    # Found by address (its keyed hash), key, Message-ID and provider id.
    for ref in (DAVE, f"pw-{DAVE}", message_id, "prov-77"):
        found = search(page, project, ref)
        assert f"pw-{dave_tag}" in found, ref
        assert dave_tag in found
        assert DAVE not in found  # (the search box shows what was typed)
    assert "reminder-9" not in found
    # An action without a reason does nothing.
    assert "Say why" in act(page, "requeue", "")
    assert query(s, "SELECT status FROM email_outbox WHERE id = %s", dead) == [("dead",)]
    assert "Requeued 1 email(s)" in act(page, "requeue", "relay fixed")
    assert query(s, "SELECT status FROM email_outbox WHERE id = %s", dead) == [("pending",)]
    assert "Suppressed 1 address(es)" in act(page, "suppress_recipient", "asked by phone")
    search(page, project, "reminder-9")
    assert "Cancelled 1 email(s)" in act(page, "cancel", "order refunded")
    cancelled = query(
        s, "SELECT status, status_reason, locked_by FROM email_outbox WHERE id = %s", later.id
    )
    assert cancelled == [("cancelled", "cancelled: order refunded", "django:support")]
    # Filters: status, tag, template, date.
    for filters, shown in (
        ("status__exact=cancelled", True),
        ("tag=reminder", True),
        ("template=login_code", True),
        ("status__exact=sent", False),
    ):
        page.goto(f"{project.url}/admin/outbox/email/?{filters}")
        assert ("reminder-9" in page.content()) is shown, filters
    page.goto(f"{project.url}/admin/outbox/email/")
    page.click("#changelist-filter a:has-text('Today')")
    page.wait_for_load_state()
    assert "created_at__gte" in page.url
    assert "reminder-9" in page.content()
    # One email's page: read-only, every field, addresses tagged.
    page.goto(f"{project.url}/admin/outbox/email/{later.id}/change/")
    assert recipient_tag(ERIN, secret=SECRET) in page.content()
    assert ERIN not in page.content()
    assert page.locator("input[name=_save]").count() == 0
    # Suppressions: found by the whole address, removed with a reason.
    page.goto(f"{project.url}/admin/outbox/suppression/")
    page.fill("#searchbar", DAVE)
    page.press("#searchbar", "Enter")
    page.wait_for_load_state()
    assert dave_tag in page.inner_text("#result_list")
    assert "Unsuppressed 1 address(es)" in act(page, "unsuppress", "sorted out")
    assert query(s, "SELECT count(*) FROM email_suppression") == [(0,)]
    assert audit(s) == [
        ("support", "django-admin", "requeue", "relay fixed"),
        ("support", "django-admin", "suppression-add", "asked by phone"),
        ("support", "django-admin", "cancel", "order refunded"),
        ("support", "django-admin", "suppression-remove", "sorted out"),
    ]
    page.goto(f"{project.url}/admin/outbox/auditentry/")
    assert "order refunded" in page.content()
    assert DAVE not in page.content()
    page.close()
    # With outbox.reveal_address, addresses are in clear.
    root = sign_in(browser, project, SUPERUSER)
    assert DAVE in search(root, project, DAVE)
    root.close()
