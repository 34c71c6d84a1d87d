"""The one-off sweep's judgement of whether silent processes are really gone."""

from __future__ import annotations

import pytest

from outbox.relay.sweep_guard import why_not_sweep_sending

STUCK = 300.0
BEAT = 5.0


def judge(up: float, freshest: float | None) -> str | None:
    return why_not_sweep_sending(
        postgres_up_seconds=up,
        freshest_beat_seconds=freshest,
        stuck_seconds=STUCK,
        heartbeat_seconds=BEAT,
    )


@pytest.mark.parametrize("freshest", [None, 0.0, 4.9, 10.0])
def test_a_long_running_postgres_with_beating_processes_may_be_swept(
    freshest: float | None,
) -> None:
    assert judge(3600.0, freshest) is None


@pytest.mark.parametrize("up", [0.0, 12.0, 299.9])
def test_a_recently_started_postgres_is_not_trusted(up: float) -> None:
    reason = judge(up, 1.0)
    assert reason is not None
    assert "Postgres started" in reason
    assert "OUTBOX_STUCK_SECONDS" in reason


def test_every_process_silent_at_once_reads_as_an_outage() -> None:
    reason = judge(3600.0, 10.1)
    assert reason is not None
    assert "no relay or worker has beaten for 10 s" in reason


def test_the_threshold_itself_is_enough() -> None:
    assert judge(STUCK, 2 * BEAT) is None
