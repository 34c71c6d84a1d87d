"""`outbox demo`: it sends through the real pipeline and leaves the database as it was."""

from __future__ import annotations

import re

import psycopg
import pytest
import redis

from outbox.config import Settings
from tests.integration.helpers import query
from tests.integration.test_cli import outbox

# The whole demo, processes and all.
pytestmark = pytest.mark.slow


def _demo_schemas(settings: Settings) -> list[str]:
    rows = query(settings, "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'outbox_demo_%'")
    return [r[0] for r in rows]


def _keys_of_run(stdout: str, client: redis.Redis) -> list[bytes]:
    run = re.search(r"^run (demo-[0-9a-f-]+):", stdout, re.MULTILINE)
    assert run, stdout
    return list(client.scan_iter(match=f"{run.group(1)}*"))


def test_the_demo_cleans_up_after_itself(settings: Settings, redis_client: redis.Redis) -> None:
    result = outbox(settings, "demo", "--newsletter", "20", "--timeout", "90")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _keys_of_run(result.stdout, redis_client) == []  # heartbeats, epoch: all gone
    assert re.search(r"the login code's Message-ID: <[0-9a-f]+@", result.stdout)
    assert "dropped: the database keeps nothing of the demo" in result.stdout
    assert "outbox demo --keep" in result.stdout
    assert _demo_schemas(settings) == []
    assert query(settings, "SELECT count(*) FROM email_outbox") == [(0,)]


def test_the_demo_kept_can_be_looked_at_with_the_commands_it_prints(
    settings: Settings, redis_client: redis.Redis
) -> None:
    result = outbox(settings, "demo", "--newsletter", "10", "--timeout", "90", "--keep")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _keys_of_run(result.stdout, redis_client) == []  # the schema is what is kept
    (schema,) = _demo_schemas(settings)
    try:
        named = re.search(r"export OUTBOX_SCHEMA=(\S+)", result.stdout)
        message_id = re.search(r"outbox show '(<[^']+>)'", result.stdout)
        assert named, result.stdout
        assert message_id, result.stdout
        assert named.group(1) == schema
        shown = outbox(settings, "show", message_id.group(1), env={"OUTBOX_SCHEMA": schema})
        assert shown.returncode == 0, shown.stderr
        assert "status: sent" in shown.stdout
        assert "login_code" in shown.stdout
        assert query(settings, "SELECT count(*) FROM email_outbox") == [(0,)]  # not in public
    finally:
        with psycopg.connect(settings.database_url) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
