"""The send concurrency cap shared through Redis by several workers."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from outbox.config import Settings
from outbox.models import Reply, Stage
from outbox.transports.base import OutgoingMessage, TransportBusy
from outbox.transports.select import build_transport
from outbox.transports.shared_limit import SharedLimited
from tests.integration.helpers import add_newsletter, harness, query, statuses

MESSAGE = OutgoingMessage("a@x.example", "b@y.example", b"", "<m@x>", "key")


class Slow:
    """A transport that takes ``seconds`` per send and counts sends in progress."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.now = 0
        self.most = 0
        self.sent = 0
        self._lock = threading.Lock()

    def send(self, message: OutgoingMessage) -> Reply:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.seconds)
        with self._lock:
            self.now -= 1
            self.sent += 1
        return Reply(Stage.FINAL_REPLY, 250, "ok")

    def close(self) -> None:
        pass


@pytest.fixture
def key(redis_client: redis.Redis) -> Iterator[str]:
    name = f"outbox-test-{uuid.uuid4().hex[:8]}:send-slots"
    yield name
    redis_client.delete(name)


def test_the_cap_holds_across_workers_with_their_own_clients(key: str) -> None:
    slow = Slow(0.05)
    # Three "processes", each with its own Redis connection, four threads each.
    limits = [
        SharedLimited(slow, redis.Redis(), key=key, limit=3, lease=30, wait=10) for _ in range(3)
    ]

    def send_some(limited: SharedLimited) -> None:
        for _ in range(5):
            limited.send(MESSAGE)

    threads = [threading.Thread(target=send_some, args=(lim,)) for lim in limits for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert slow.sent == 60
    assert slow.most == 3


def test_a_crashed_holders_slot_lapses(key: str, redis_client: redis.Redis) -> None:
    limited = SharedLimited(Slow(0), redis_client, key=key, limit=1, lease=0.5, wait=0.1)
    redis_client.zadd(key, {"crashed-worker": time.time() + 0.5})  # never given back
    with pytest.raises(TransportBusy, match="1 sends already in flight"):
        limited.send(MESSAGE)
    time.sleep(0.6)
    assert limited.send(MESSAGE).code == 250
    assert redis_client.zcard(key) == 0  # given back after the send


@pytest.mark.slow
def test_redis_away_means_uncapped_not_stopped(caplog: pytest.LogCaptureFixture) -> None:
    client = redis.Redis(port=1, socket_connect_timeout=0.2)
    limited = SharedLimited(Slow(0), client, key="k", limit=1, lease=1, wait=0.1)
    assert limited.send(MESSAGE).code == 250
    assert limited.send(MESSAGE).code == 250
    assert caplog.text.count("send concurrency is not capped") == 1


@pytest.mark.slow
def test_a_busy_transport_puts_rows_back_without_an_attempt(
    settings: Settings, redis_client: redis.Redis
) -> None:
    settings = dataclasses.replace(settings, send_concurrency=1)
    slots = f"{settings.namespace}:send-slots"
    redis_client.zadd(slots, {"another-worker": time.time() + 1.5})  # holds the only slot
    add_newsletter(settings, 3)
    with harness(settings) as (h, sink):
        h.delivery.transport = build_transport(
            dataclasses.replace(settings, smtp_url=sink.url, smtp_command_timeout=2)
        )
        assert isinstance(h.delivery.transport, SharedLimited)
        h.run(timeout=30)
    assert statuses(settings) == {"sent": 3}
    assert query(settings, "SELECT max(attempt) FROM email_attempt") == [(1,)]
    went_back = query(
        settings,
        "SELECT count(*) FROM email_event WHERE reason LIKE 'transport busy:%%'"
        " AND to_status = 'pending'",
    )
    assert went_back[0][0] >= 1
