"""Outage logging: once down, once back, and summaries instead of a line per email."""

from __future__ import annotations

import logging

import pytest

from outbox.relay.broker_watch import row_ids
from outbox.telemetry.log_once import DownOnce, Summary
from outbox.worker.heartbeat import queues_of_argv


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_down_once_says_down_once_and_back_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    part = DownOnce(logging.getLogger("t"), "Postgres", clock=clock)
    with caplog.at_level(logging.WARNING):
        assert part.ok() is False  # never down: nothing to say
        assert part.failed("refused", waiting="12 bulk") is True
        for _ in range(100):
            clock.now += 0.5
            assert part.failed("refused") is False
        assert part.is_down
        assert part.ok(waiting="12 bulk") is True
        assert part.ok() is False
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "Postgres is down: refused; 12 bulk waiting",
        "Postgres is back after 50.0s (101 failures meanwhile); 12 bulk waiting",
    ]
    assert not part.is_down


def test_an_outage_is_said_in_one_line_without_the_errors_sql_context(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = (
        "recording results: database error: terminating connection due to administrator"
        ' command\nCONTEXT:  SQL statement "WITH changed AS (\n    SELECT n.id\n)"\n'
        "PL/pgSQL function email_outbox_record_update() line 3 at SQL statement"
    )
    part = DownOnce(logging.getLogger("t"), "Postgres", clock=Clock())
    with caplog.at_level(logging.WARNING):
        assert part.failed(error, waiting="results of 1 rows") is True
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "Postgres is down: recording results: database error: terminating connection due to"
        " administrator command; results of 1 rows waiting"
    ]


def test_a_success_of_work_begun_before_the_outage_is_not_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One thread's answer arriving just after another thread saw Postgres go says
    nothing about now: only work begun after the outage was noticed ends it."""
    clock = Clock()
    part = DownOnce(logging.getLogger("t"), "Postgres", clock=clock)
    with caplog.at_level(logging.WARNING):
        began_early = clock.now
        clock.now = 1.0
        assert part.failed("server closed the connection") is True
        clock.now = 1.01
        assert part.ok(began=began_early) is False  # the late answer
        assert part.is_down
        clock.now = 3.0
        began = clock.now
        clock.now = 3.2
        assert part.ok(began=began) is True
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "Postgres is down: server closed the connection",
        "Postgres is back after 2.2s (1 failures meanwhile)",
    ]


def test_summary_logs_at_most_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    summary = Summary(logging.getLogger("t"), "emails returned", interval=10, clock=clock)
    with caplog.at_level(logging.WARNING):
        for i in range(1000):  # 1000 emails over 20 s
            clock.now = i * 0.02
            summary.add("transport down" if i % 2 else "connection refused")
        summary.flush(force=True)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("501 emails returned in 10s: ")
    assert "transport down" in lines[0]
    assert "connection refused" in lines[0]
    total = sum(int(line.split()[0]) for line in lines)
    assert total == 1000


def test_summary_names_the_top_reasons(caplog: pytest.LogCaptureFixture) -> None:
    summary = Summary(logging.getLogger("t"), "returned", interval=0, clock=Clock())
    with caplog.at_level(logging.WARNING):
        summary._counts.update({"a": 5, "b": 4, "c": 3, "d": 1})
        summary.flush(force=True)
    assert (
        caplog.records[0].getMessage() == "13 returned in 0s: 5 a; 4 b; 3 c (and 1 other reasons)"
    )


@pytest.mark.parametrize(
    ("argv", "queues"),
    [
        (["dramatiq", "outbox.worker", "-Q", "email_bulk", "-p", "1"], ["email_bulk"]),
        (
            ["dramatiq", "outbox.worker", "--queues", "email_high", "email_bulk"],
            ["email_high", "email_bulk"],
        ),
        (["dramatiq", "outbox.worker"], []),
    ],
)
def test_queues_of_argv(argv: list[str], queues: list[str]) -> None:
    assert queues_of_argv(argv) == queues


@pytest.mark.parametrize(
    ("raw", "ids"),
    [
        (b'{"args": [[1, 2, 3]], "queue_name": "email_bulk"}', [1, 2, 3]),
        (b'{"args": [[7]]}', [7]),
        (b'{"args": []}', []),
        (b'{"args": [["x"]]}', []),
        (b"not json", []),
        (b'{"kwargs": {}}', []),
    ],
)
def test_row_ids_of_a_broker_message(raw: bytes, ids: list[int]) -> None:
    assert row_ids(raw) == ids
