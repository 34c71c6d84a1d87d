"""A worker process says once that it lost the broker and once that it is back,
however many times its consumer threads retry meanwhile."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from outbox.worker.broker_outage import BrokerOutage, consumer_loggers


def _record(message: str, *args: object, level: int = logging.CRITICAL) -> logging.LogRecord:
    return logging.LogRecord("dramatiq.worker", level, __file__, 1, message, args, None)


class FlakyBroker:
    """Refuses ``failures`` probes, then answers."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.asked = 0
        self.answered = threading.Event()

    def ping(self) -> bool:
        self.asked += 1
        if self.asked <= self.failures:
            raise ConnectionError("Connection refused")
        self.answered.set()
        return True


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "outbox.worker.broker_outage"]


def _wait_for_lines(caplog: pytest.LogCaptureFixture, n: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if len([line for line in _lines(caplog) if "yet" not in line]) >= n:
            return
        time.sleep(0.01)
    raise AssertionError(f"fewer than {n} lines: {_lines(caplog)}")


def test_many_consumer_errors_make_one_down_line_and_one_back_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = FlakyBroker(failures=3)
    outage = BrokerOutage(broker.ping, every=0.01)
    caplog.set_level(logging.DEBUG)
    kept = []
    for _ in range(5):
        kept.append(
            outage.filter(_record("Consumer encountered a connection error: %s", "Error 111"))
        )
        kept.append(outage.filter(_record("Restarting consumer in %0.2f seconds.", 3.0)))
    assert kept == [False] * 10
    assert broker.answered.wait(10), "the probe never asked the broker again"
    _wait_for_lines(caplog, 2)
    lines = [line for line in _lines(caplog) if "yet" not in line]
    assert len(lines) == 2, lines
    assert lines[0] == "the broker is down: Error 111"
    assert lines[1].startswith("the broker is back after")
    assert broker.asked == 4  # three refusals, then the answer that ended the outage


def test_other_consumer_lines_pass_and_a_restart_line_passes_while_up() -> None:
    outage = BrokerOutage(lambda: True)
    assert outage.filter(_record("Consumer encountered an unexpected error."))
    assert outage.filter(_record("Restarting consumer in %0.2f seconds.", 3.0))


def test_a_second_outage_is_said_again(caplog: pytest.LogCaptureFixture) -> None:
    broker = FlakyBroker(failures=0)
    outage = BrokerOutage(broker.ping, every=0.01)
    caplog.set_level(logging.WARNING)
    for outages in (1, 2):
        outage.filter(_record("Consumer encountered a connection error: %s", "gone"))
        _wait_for_lines(caplog, 2 * outages)
    assert [line.split(" ")[3] for line in _lines(caplog)] == ["down:", "back", "down:", "back"]


def test_the_filter_sits_on_the_consumers_of_each_queue_and_its_delay_queue() -> None:
    names = [logger.name for logger in consumer_loggers(["email_high"])]
    assert names == [
        "dramatiq.worker.ConsumerThread(email_high)",
        "dramatiq.worker.ConsumerThread(email_high.DQ)",
    ]


def test_acknowledgements_lost_with_the_connection_are_the_same_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = FlakyBroker(failures=0)
    outage = BrokerOutage(broker.ping, every=0.01)
    caplog.set_level(logging.WARNING)
    unacked = "Failed to post_process_message(%s) due to a connection error: %s\nretried"
    for _ in range(3):
        assert not outage.filter(_record(unacked, "deliver_bulk([1, 2])", "closed"))
    assert not outage.filter(_record("Failed to ack message: not in known tags."))
    assert outage.filter(_record("Failed to post_process_message(%s): %s", "m", "other"))
    _wait_for_lines(caplog, 2)
    lines = _lines(caplog)
    assert lines[0] == "the broker is down: an acknowledgement was lost with the connection"
    assert lines[1].startswith("the broker is back after")
