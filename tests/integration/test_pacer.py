"""The shared pacer against a real Redis, with the clock given explicitly."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest

from outbox.config import Settings
from outbox.models import Priority
from outbox.pacing.gauges import PaceCollector
from outbox.pacing.pacer import Pacer, PaceSettings, pacer_for
from outbox.pacing.rules import GLOBAL, RateLimits

T0 = 1_000_000.0


@pytest.fixture
def namespace(redis_client: redis.Redis) -> Iterator[str]:
    name = f"pacer-test-{uuid.uuid4().hex[:8]}"
    yield name
    for key in redis_client.scan_iter(f"{name}*"):
        redis_client.delete(key)


def make(client: redis.Redis, namespace: str, limits: str, total: str = "", **pace: float) -> Pacer:
    return Pacer(
        RateLimits.parse(limits, total), client, namespace=namespace, pace=PaceSettings(**pace)
    )


def test_slots_are_spaced_by_the_interval_and_bulk_waits_little(
    redis_client: redis.Redis, namespace: str
) -> None:
    pacer = make(redis_client, namespace, "gmail.com=10/s", max_wait_bulk=0.25)
    slots = [pacer.reserve("a@gmail.com", Priority.BULK, now=T0) for _ in range(6)]
    assert [s.granted for s in slots if s] == [True, True, True, False, False, False]
    assert [round(s.wait, 3) for s in slots if s] == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    assert {s.key for s in slots if s} == {"gmail.com"}
    # Deferred bulk sends were booked one interval apart: the next one queues behind them.
    later = pacer.reserve("b@googlemail.com", Priority.BULK, now=T0)
    assert later is not None
    assert not later.granted
    assert later.wait == pytest.approx(0.6)


def test_high_priority_is_not_booked_behind_bulk(redis_client: redis.Redis, namespace: str) -> None:
    pacer = make(redis_client, namespace, "gmail.com=10/s", max_wait_bulk=0.2, max_wait_high=1)
    for _ in range(20):  # a newsletter: 3 slots taken, 17 booked up to 2 s ahead
        pacer.reserve("n@gmail.com", Priority.BULK, now=T0)
    login = pacer.reserve("login@gmail.com", Priority.HIGH, now=T0)
    assert login is not None
    assert login.granted
    assert login.wait == pytest.approx(0.3)
    # A high send that would wait too long is told when to come back, and books nothing.
    for _ in range(7):
        pacer.reserve("login@gmail.com", Priority.HIGH, now=T0)
    too_far = pacer.reserve("login@gmail.com", Priority.HIGH, now=T0)
    assert too_far is not None
    assert not too_far.granted
    assert too_far.wait == pytest.approx(1.1)
    again = pacer.reserve("login@gmail.com", Priority.HIGH, now=T0)
    assert again is not None
    assert again.wait == pytest.approx(1.1)


def test_receivers_do_not_hold_each_other_up(redis_client: redis.Redis, namespace: str) -> None:
    pacer = make(redis_client, namespace, "gmail.com=1/s,*=100/s")
    assert pacer.reserve("a@gmail.com", Priority.BULK, now=T0).granted  # type: ignore[union-attr]
    assert not pacer.reserve("a@gmail.com", Priority.BULK, now=T0).granted  # type: ignore[union-attr]
    other = pacer.reserve("a@example.org", Priority.BULK, now=T0)
    assert other is not None
    assert other.granted
    assert other.wait == 0
    assert pacer.reserve("a@unlimited.example", Priority.BULK, now=T0) is not None  # the * rate
    assert (
        make(redis_client, namespace, "gmail.com=1/s").reserve(
            "a@example.org", Priority.BULK, now=T0
        )
        is None
    )


def test_global_rate_applies_across_receivers_without_charging_waits_ahead(
    redis_client: redis.Redis, namespace: str
) -> None:
    pacer = make(redis_client, namespace, "gmail.com=10/s", total="50/s", max_wait_bulk=0.5)
    first = pacer.reserve("a@gmail.com", Priority.BULK, now=T0)
    second = pacer.reserve("a@gmail.com", Priority.BULK, now=T0)  # waits 0.1 s for gmail.com
    assert first is not None
    assert second is not None
    assert second.wait == pytest.approx(0.1)
    # The global rate was charged from now, not from gmail.com's slot.
    other = pacer.reserve("a@example.org", Priority.BULK, now=T0)
    assert other is not None
    assert other.key == GLOBAL
    assert other.wait == pytest.approx(0.04)
    waits = [pacer.reserve(f"{i}@example.org", Priority.BULK, now=T0) for i in range(30)]
    granted = [s for s in waits if s and s.granted]
    assert max(s.wait for s in granted) <= 0.5
    assert len(granted) == 23  # 50/s: 0.06 s ... 0.5 s


def test_throttling_halves_the_pace_once_per_cooldown_and_recovers(
    redis_client: redis.Redis, namespace: str
) -> None:
    pacer = make(redis_client, namespace, "gmail.com=10/s", floor=0.2, recovery=100, cooldown=5)
    assert pacer.factor("gmail.com", now=T0) == 1.0
    assert pacer.throttled("gmail.com", now=T0) == pytest.approx(0.5)
    assert pacer.throttled("gmail.com", now=T0 + 1) == pytest.approx(0.505)  # cooling down
    assert pacer.throttled("gmail.com", now=T0 + 6) == pytest.approx(0.265)
    assert pacer.throttled("gmail.com", now=T0 + 12) == pytest.approx(0.2)  # the floor
    assert pacer.factor("gmail.com", now=T0 + 62) == pytest.approx(0.6)
    assert pacer.factor("gmail.com", now=T0 + 112) == pytest.approx(1.0)
    # A lowered pace widens the spacing of new slots.
    pacer.throttled("gmail.com", now=T0 + 200)  # from 1.0 → 0.5: 5/s
    slots = [pacer.reserve("a@gmail.com", Priority.HIGH, now=T0 + 200) for _ in range(3)]
    assert [round(s.wait, 3) for s in slots if s] == [0.0, 0.2, 0.4]


@pytest.mark.slow
def test_the_pace_of_an_untouched_key_expires(redis_client: redis.Redis, namespace: str) -> None:
    pacer = make(redis_client, namespace, "gmail.com=10/s", recovery=0.5)
    pacer.throttled("gmail.com")
    assert redis_client.exists(f"{namespace}:pace:gmail.com:pace")
    pacer.reserve("a@gmail.com", Priority.BULK)
    time.sleep(1.7)
    assert not list(redis_client.scan_iter(f"{namespace}*"))


def test_concurrent_reservations_never_share_a_slot(
    redis_client: redis.Redis, namespace: str
) -> None:
    pacer = make(redis_client, namespace, "gmail.com=100/s", max_wait_bulk=10)
    waits: list[float] = []
    lock = threading.Lock()

    def reserve() -> None:
        for _ in range(50):
            slot = pacer.reserve("a@gmail.com", Priority.BULK, now=T0)
            assert slot is not None
            assert slot.granted
            with lock:
                waits.append(round(slot.wait, 4))

    threads = [threading.Thread(target=reserve) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(waits) == [round(i * 0.01, 4) for i in range(400)]


class HangingUp:
    """A loopback port that accepts every connection and closes it at once, counting them."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:  # closed
                return
            self.connections += 1  # before the close the client is waiting for
            client.close()

    def close(self) -> None:
        self.server.shutdown(socket.SHUT_RDWR)  # ends the accept (a close alone does not)
        self.server.close()
        self.thread.join(5)


def test_redis_away_means_unpaced_not_stopped(caplog: pytest.LogCaptureFixture) -> None:
    away = HangingUp()
    try:
        settings = Settings(
            redis_url=f"redis://127.0.0.1:{away.port}/0", rate_limits="gmail.com=1/s"
        )
        pacer = pacer_for(settings)
        assert pacer is not None
        assert pacer.reserve("a@gmail.com", Priority.HIGH) is None
        assert away.connections == 1  # asked once, no retry to wait through
        assert pacer.reserve("a@gmail.com", Priority.HIGH) is None
        assert away.connections == 1  # not asked again for a while
        assert pacer.throttled("gmail.com") is None
        assert away.connections == 2
    finally:
        away.close()
    assert caplog.text.count("pacing is off for 5s: Redis cannot be reached") == 1


def test_pacer_only_when_a_rate_is_configured(settings: Settings) -> None:
    assert pacer_for(settings) is None
    paced = Settings(**{**settings.__dict__, "send_rate": "10/s"})
    pacer = pacer_for(paced)
    assert pacer is not None
    assert pacer.limits.total is not None
    assert pacer.namespace == settings.namespace


def test_pace_figures_for_prometheus(redis_client: redis.Redis, namespace: str) -> None:
    pacer = make(
        redis_client, namespace, "gmail.com=20/s, outlook.com=600/m, *=50/s", total="100/s"
    )
    pacer.throttled("gmail.com")
    pacer.throttled("example.org")  # throttled under the * rate: shown from now on
    registry = CollectorRegistry()
    registry.register(PaceCollector(pacer))
    text = generate_latest(registry).decode()
    factors = {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("outbox_pace_factor{")
    }
    assert factors.keys() == {"gmail.com", "outlook.com", "example.org", GLOBAL}
    assert factors["gmail.com"] == pytest.approx(0.5, abs=0.01)
    assert factors["example.org"] == pytest.approx(0.5, abs=0.01)
    assert factors["outlook.com"] == 1.0
    assert 'outbox_pace_limit_per_second{receiver="outlook.com"} 10.0' in text
    assert f'outbox_pace_limit_per_second{{receiver="{GLOBAL}"}} 100.0' in text


@pytest.mark.slow
def test_pace_figures_are_absent_while_redis_is_away() -> None:
    client = redis.Redis(port=1, socket_connect_timeout=0.2)
    registry = CollectorRegistry()
    registry.register(PaceCollector(Pacer(RateLimits.parse("gmail.com=1/s"), client)))
    assert "outbox_pace_factor" not in generate_latest(registry).decode()
