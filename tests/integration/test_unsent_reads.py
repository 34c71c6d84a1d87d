"""What waits unsent (pending, queued or sending), read through the pending
index and the in-flight index apart (migration 0031): the oldest unsent age
of `outbox status` and of the metrics, and the unsent counts."""

from __future__ import annotations

import pytest

from outbox.config import Settings
from outbox.db.store import counts, metrics_reads
from tests.integration.helpers import add_login, pool, query

HOUR = 3600.0


def _aged(settings: Settings, key: str, status: str, hours: float) -> int:
    """A login code in ``status``, enqueued ``hours`` ago."""
    outbox_id = add_login(settings, key, f"{key}@example.com")
    query(
        settings,
        "UPDATE email_outbox SET status = %s, created_at = now() - make_interval(hours => %s)"
        " WHERE id = %s RETURNING id",
        status,
        hours,
        outbox_id,
    )
    return outbox_id


def _oldest(settings: Settings) -> list[float | None]:
    """The oldest unsent high-priority row's age: outbox status's, the metrics'."""
    with pool(settings) as p, p.connection() as conn:
        status = counts.oldest_unsent(conn).get("high")
        heads = metrics_reads.metrics_current(conn, ["high"]).heads
    return [status, next((float(h[1]) for h in heads if h[0] == "high"), None)]


def _about(hours: float) -> list[object]:
    """Both ages, within a minute of ``hours`` (the test's own time included)."""
    return [pytest.approx(hours * HOUR, abs=60)] * 2


def test_a_row_in_flight_counts_as_unsent_as_a_pending_one_does(settings: Settings) -> None:
    with pool(settings) as p, p.connection() as conn:
        assert counts.oldest_unsent(conn) == {}
    _aged(settings, "fresh", "pending", 0)
    _aged(settings, "settled", "sent", 5)  # sent rows are not waiting
    assert _oldest(settings) == _about(0)
    # A row queued two hours ago, whose broker message never reached a worker.
    _aged(settings, "stuck-queued", "queued", 2)
    assert _oldest(settings) == _about(2)
    # One sending for three hours is older still; a pending one older than both wins.
    _aged(settings, "stuck-sending", "sending", 3)
    assert _oldest(settings) == _about(3)
    _aged(settings, "old-pending", "pending", 4)
    assert _oldest(settings) == _about(4)
    with pool(settings) as p, p.connection() as conn:
        assert counts.unsent_counts(conn) == {"high": 4}


def test_only_rows_in_flight_are_found_when_none_is_pending(settings: Settings) -> None:
    _aged(settings, "queued-only", "queued", 1)
    assert _oldest(settings) == _about(1)
    with pool(settings) as p, p.connection() as conn:
        assert counts.unsent_counts(conn) == {"high": 1}
