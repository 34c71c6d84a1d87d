"""outbox.django configured from settings.py, checked by ``manage.py check``, and its priorities.

The project is tests/django_project (``configured.py``: ``OUTBOX = {…}``,
``DEFAULT_FROM_EMAIL``, ``PriorityMiddleware``), run as its own processes
against the real Postgres: Django's own password reset form and view send
through the outbox's EmailBackend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import ADMIN_URL

ROOT = Path(__file__).resolve().parents[2]
MANAGE = ROOT / "tests" / "django_project" / "manage.py"
# Names the runs below set or expect unset: the suite's own environment must not decide them.
OURS = ("OUTBOX_FROM", "OUTBOX_MESSAGE_ID_DOMAIN", "OUTBOX_SENDER_DOMAINS", "OUTBOX_SECRET")


@pytest.fixture
def project_db() -> Iterator[str]:
    name = f"outbox_django_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        yield name
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def _env(db: str, **given: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OURS and k != "DJANGO_SETTINGS_MODULE"}
    return {**env, "OUTBOX_TEST_DJANGO_DB": db, **given}


def _rows(db: str, **given: str) -> dict[str, dict[str, str]]:
    run = subprocess.run(
        [sys.executable, "-m", "tests.django_project.priority_scenario"],
        cwd=ROOT, env=_env(db, **given), capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    return {row["recipient"]: row for row in rows}


def test_django_security_mail_goes_on_the_high_queue_and_the_rest_stays_bulk(
    project_db: str,
) -> None:
    rows = _rows(project_db)
    assert set(rows) == {
        "alice@example.com", "news@example.com", "code@example.com", "alert@example.com"
    }  # fmt: skip
    reset = rows["alice@example.com"]
    assert reset["subject"] == "Password reset on testserver"  # Django's form, its templates
    assert reset["priority"] == "high"  # PasswordResetView, by PriorityMiddleware
    assert rows["news@example.com"]["priority"] == "bulk"  # nothing marks it
    assert rows["code@example.com"]["priority"] == "high"  # inside high_priority()
    assert rows["alert@example.com"]["priority"] == "high"  # its X-Outbox-Priority header
    # settings.OUTBOX's Message-ID domain; DEFAULT_FROM_EMAIL as the From (OUTBOX_FROM unset).
    assert all(r["message_id"].endswith("@shop.example>") for r in rows.values()), rows
    assert {r["sender"] for r in rows.values()} == {"Shop <shop@outbox.localhost>"}


def test_the_environment_wins_over_settings_outbox(project_db: str) -> None:
    rows = _rows(
        project_db,
        OUTBOX_MESSAGE_ID_DOMAIN="env.example",
        OUTBOX_FROM="Ops <ops@outbox.localhost>",
    )
    assert all(r["message_id"].endswith("@env.example>") for r in rows.values()), rows
    assert {r["sender"] for r in rows.values()} == {"Ops <ops@outbox.localhost>"}


def _check(**given: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(MANAGE), "check"],
        cwd=ROOT, env=_env("unused", **given), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def test_manage_py_check_fails_on_a_weak_secret_with_outboxs_message() -> None:
    weak = _check(OUTBOX_SECRET="change-me")
    assert weak.returncode == 1, weak.stdout + weak.stderr
    assert "outbox.E001" in weak.stderr
    assert "OUTBOX_SECRET" in weak.stderr
    assert "secrets.token_urlsafe(32)" in weak.stderr  # Outbox's own line, its advice
    assert "change-me" not in weak.stderr  # the value is never shown
    # A DATABASE_URL in a form of the project's own is Django's business, not Outbox's.
    good = _check(
        OUTBOX_SECRET="q3Jw9vRb2xLkT7mZpY4sHc8dNf6gUa1e", DATABASE_URL="postgis://db/shop"
    )
    assert good.returncode == 0, good.stdout + good.stderr
    assert "no issues" in good.stdout


def test_manage_py_check_names_a_setting_outbox_does_not_have() -> None:
    bad = _check(OUTBOX_TEST_DJANGO_EXTRA='{"OUTBOX_FORM": "typo@example.com"}')
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "'OUTBOX_FORM' is no Outbox setting" in bad.stderr
