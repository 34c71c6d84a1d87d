from __future__ import annotations

import subprocess
import sys
from typing import Any

import psycopg
import pytest

from outbox import enqueue, enqueue_many
from outbox.config import Settings
from outbox.db.store import suppressions
from outbox.errors import StoreError
from outbox.redact import recipient_tag
from tests.integration.helpers import LOGIN, NEWS, query, statuses


def send(
    conn: psycopg.Connection[Any], settings: Settings, key: str, to: str, priority: str
) -> Any:
    template, params = ("login_code", LOGIN) if priority == "high" else ("newsletter", NEWS)
    return enqueue(
        conn,
        idempotency_key=key,
        to=to,
        template=template,
        params=params,
        priority=priority,
        settings=settings,
    )


def test_suppressed_recipient_is_never_queued(
    conn: psycopg.Connection[Any], settings: Settings
) -> None:
    suppressions.suppress(conn, "Bounced@Example.com", reason="hard_bounce")
    conn.commit()
    with psycopg.connect(settings.database_url, autocommit=True) as listener:
        listener.execute("LISTEN outbox_due")
        result = send(conn, settings, "k1", "bounced@example.com", "high")
        conn.commit()
        assert list(listener.notifies(timeout=0.3)) == []  # nothing to wake a relay for
    assert result.created
    assert result.suppressed
    row = query(settings, "SELECT status, status_reason FROM email_outbox")[0]
    assert row == ("suppressed", "recipient suppressed: hard_bounce")


def test_an_unsubscribe_stops_newsletters_not_login_codes(
    conn: psycopg.Connection[Any], settings: Settings
) -> None:
    assert suppressions.suppress(conn, "reader@example.com", reason="unsubscribe", scope="bulk")
    conn.commit()
    assert send(conn, settings, "news", "reader@example.com", "bulk").suppressed
    assert not send(conn, settings, "code", "reader@example.com", "high").suppressed
    conn.commit()
    assert statuses(settings) == {"suppressed": 1, "pending": 1}


def test_a_wider_scope_replaces_a_narrower_one(conn: psycopg.Connection[Any]) -> None:
    assert suppressions.suppress(conn, "a@example.com", reason="unsubscribe", scope="bulk")
    assert not suppressions.suppress(conn, "a@example.com", reason="unsubscribe", scope="bulk")
    assert suppressions.suppress(conn, "a@example.com", reason="complaint", scope="all")
    assert not suppressions.suppress(conn, "A@example.com", reason="unsubscribe", scope="bulk")
    found = suppressions.find_suppression(conn, "a@EXAMPLE.com")
    assert found is not None
    assert (found.scope, found.reason) == ("all", "complaint")
    assert suppressions.unsuppress(conn, "a@example.com")
    assert suppressions.find_suppression(conn, "a@example.com") is None


def test_enqueue_many_checks_every_recipient(
    conn: psycopg.Connection[Any], settings: Settings
) -> None:
    suppressions.suppress(conn, "r3@example.com", reason="complaint")
    suppressions.suppress(conn, "r5@example.com", reason="unsubscribe", scope="bulk")
    conn.commit()
    rows = [
        {
            "idempotency_key": f"nl-{i}",
            "to": f"r{i}@example.com",
            "template": "newsletter",
            "params": NEWS,
        }
        for i in range(8)
    ]
    results = enqueue_many(conn, rows, settings=settings)
    conn.commit()
    assert [r.idempotency_key for r in results if r.suppressed] == ["nl-3", "nl-5"]
    assert statuses(settings) == {"pending": 6, "suppressed": 2}


@pytest.mark.parametrize("reason", ["", "two\nlines", "x" * 201])
def test_reasons_that_are_not_one_line_are_refused(
    conn: psycopg.Connection[Any], reason: str
) -> None:
    with pytest.raises(StoreError):
        suppressions.suppress(conn, "a@example.com", reason=reason)


def test_an_operators_own_reason_is_kept(conn: psycopg.Connection[Any]) -> None:
    assert suppressions.suppress(conn, "a@example.com", reason="asked by phone")
    found = suppressions.find_suppression(conn, "a@example.com")
    assert found is not None
    assert found.reason == "asked by phone"


def test_cli(settings: Settings) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "outbox.cli", "suppress", *args],
            env=settings.to_env(),
            capture_output=True,
            text=True,
            check=False,
        )

    assert cli("check", "x@example.com").returncode == 1
    assert cli("add", "X@Example.com", "--scope", "bulk").stdout.strip() == "suppressed (bulk)"
    checked = cli("check", "x@example.com")
    assert checked.returncode == 0
    assert "suppressed (bulk): manual" in checked.stdout
    listed = cli("list").stdout
    assert "x@example.com" not in listed  # tagged, like all output
    assert recipient_tag("x@example.com", secret=settings.secret) in listed
    assert "x@example.com" in cli("list", "--reveal").stdout
    assert cli("add", "not an address").returncode == 2
    assert cli("remove", "x@example.com").stdout.strip() == "removed"
    assert cli("remove", "x@example.com").returncode == 1
