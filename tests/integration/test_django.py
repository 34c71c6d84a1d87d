"""outbox.django in a real Django project on the real Postgres, both of Django's drivers.

Each backend runs in a process of its own (Django binds its driver once);
tests/django_project/scenario.py holds the steps and their assertions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from outbox.config import Settings
from tests.conftest import ADMIN_URL

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
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())
