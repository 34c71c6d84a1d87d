"""Scenario 1: a worker killed with SIGKILL after the relay's 250, before the row is marked sent.

The SMTP server keeps certain messages and then stalls before answering, so
the kill lands exactly in the duplicate window: the message has left, the row
still says ``sending``. The sweeper must return the row, and the resend must
carry the same Message-ID.
"""

from __future__ import annotations

import dataclasses
import threading
import time

from outbox.config import Settings
from outbox.testing.sink import ACCEPT, Behaviour
from tests.acceptance.checks import (
    add_emails,
    assert_no_loss,
    query,
    report,
    wait_final,
    wait_until,
)
from tests.acceptance.conftest import (
    Rig,
    child_env,
    scaled,
    spawn_relay,
    spawn_workers,
    timeout,
)
from tests.acceptance.servers import RedisServer

POOLS = {"email_high": (1, 4), "email_bulk": (1, 8)}


def test_sigkill_between_the_relays_250_and_the_row_marked_sent(
    broker_settings: Settings, rig: Rig
) -> None:
    settings = broker_settings
    bulk = add_emails(settings, scaled(800), prefix="nl")
    high = add_emails(settings, scaled(80), prefix="hi", priority="high")
    victims = {bulk[i] for i in range(100, len(bulk), len(bulk) // 5)}
    victims |= {high[i] for i in range(20, len(high), len(high) // 2)}
    trapped: set[str] = set()
    lock = threading.Lock()

    def behaviour(address: str) -> Behaviour:
        with lock:
            if address in victims and address not in trapped:
                trapped.add(address)
                return Behaviour(stall_after_record=30)
        return ACCEPT

    sink = rig.sink(behaviour)
    p = rig.pipeline(
        child_env(settings, sink.url), high=POOLS["email_high"], bulk=POOLS["email_bulk"]
    )
    killed_at: dict[str, float] = {}
    handled = 0
    kills = 0
    while handled < len(victims):
        stalled = sink.wait_for_stalls(handled + 1, timeout=timeout(60))
        assert len(stalled) > handled, f"victims never reached: {sorted(victims - set(stalled))}"
        fresh = stalled[handled:]
        for queue in sorted({"email_high" if r.startswith("hi") else "email_bulk" for r in fresh}):
            p.kill(queue)  # SIGKILL to the pool's process group, during the stall
            kills += 1
            spawn_workers(p, queue, *POOLS[queue])
        now = time.monotonic()
        killed_at.update(dict.fromkeys(fresh, now))
        handled = len(stalled)
    drained = wait_final(settings, len(bulk) + len(high), timeout=timeout(90))
    figures = assert_no_loss(settings, sink)

    # Each victim: kept once before the kill, sent again after the sweep, one Message-ID.
    copies: dict[str, list[tuple[float, str | None]]] = {}
    for m in sink.messages:
        for r in m.recipients:
            copies.setdefault(r, []).append((m.at, m.message_id))
    recoveries = []
    for victim in victims:
        got = copies[victim]
        assert len(got) >= 2, f"{victim}: {len(got)} copies"
        assert len({mid for _, mid in got}) == 1
        recoveries.append(got[1][0] - killed_at[victim])
    verdicts = dict(
        query(
            settings,
            "SELECT o.recipient, string_agg(a.verdict, ',' ORDER BY a.id) FROM email_outbox o "
            "JOIN email_attempt a ON a.outbox_id = o.id WHERE o.recipient = ANY(%s) GROUP BY 1",
            sorted(victims),
        )
    )
    assert all(v.startswith("uncertain") for v in verdicts.values()), verdicts
    report(
        "1 worker SIGKILL in the 250 window",
        figures=figures,
        kills=kills,
        victims=len(victims),
        resend_after_kill_max_s=max(recoveries),
        resend_after_kill_mean_s=sum(recoveries) / len(recoveries),
        drain_s=drained,
    )


def test_sigkill_mid_drain_resends_at_most_one_message_per_thread(
    broker_settings: Settings, rig: Rig
) -> None:
    """Results are recorded as their replies arrive, not once per batch of 25: a kill
    -9 of a bulk pool resends at most the message each thread had in flight."""
    settings = broker_settings
    processes, threads = POOLS["email_bulk"]
    n = scaled(1500)
    add_emails(settings, n, prefix="nl")
    sink = rig.sink(lambda _a: Behaviour(delay=0.002))
    p = rig.pipeline(child_env(settings, sink.url), high=(0, 0), bulk=(processes, threads))
    kills = 3
    for k in range(kills):
        target = (k + 1) * n // (kills + 2)
        wait_until(lambda t=target: len(sink.messages) >= t, timeout(60), "sending under way")
        p.kill("email_bulk")  # SIGKILL mid-drain, whatever each thread was doing
        spawn_workers(p, "email_bulk", processes, threads)
    drained = wait_final(settings, n, timeout=timeout(90))
    figures = assert_no_loss(settings, sink)
    report(
        "1b worker SIGKILL mid-drain, results recorded as they arrive",
        figures=figures,
        kills=kills,
        threads=processes * threads,
        duplicates_per_kill=figures.duplicates / kills,
        drain_s=drained,
    )
    assert figures.statuses == {"sent": n}
    assert figures.duplicates <= kills * processes * threads, figures.as_dict()


def test_pools_relays_and_a_redis_flush_mid_drain_lose_nothing(
    fault_settings: Settings, rig: Rig, private_redis: RedisServer
) -> None:
    """Each result is in Postgres before its thread's next message leaves, and
    nothing of it lives in Redis: killing the bulk pool, flushing Redis, killing
    the relay and then both pools duplicates at most one message per thread
    killed, and the flush none."""
    url = private_redis.url  # the broker and every other key of Outbox's in Redis
    settings = dataclasses.replace(fault_settings, redis_url=url, broker_url=url)
    high_pool, bulk_pool = POOLS["email_high"], POOLS["email_bulk"]
    n, codes = scaled(1500), scaled(100)
    add_emails(settings, n, prefix="nl")
    add_emails(settings, codes, prefix="hi", priority="high")
    sink = rig.sink(lambda _a: Behaviour(delay=0.002))
    p = rig.pipeline(child_env(settings, sink.url), high=high_pool, bulk=bulk_pool)

    def at(share: float) -> None:
        target = int(n * share)
        wait_until(lambda: len(sink.messages) >= target, timeout(60), f"{target} sent")

    threads_killed = 0
    at(0.2)
    p.kill("email_bulk")
    threads_killed += bulk_pool[0] * bulk_pool[1]
    spawn_workers(p, "email_bulk", *bulk_pool)
    at(0.4)
    private_redis.client().flushall()  # the broker's queues and every other key
    at(0.6)
    p.kill("relay0")
    spawn_relay(p, "relay0")
    at(0.8)
    for queue, pool in POOLS.items():
        p.kill(queue)
        threads_killed += pool[0] * pool[1]
        spawn_workers(p, queue, *pool)
    drained = wait_final(settings, n + codes, timeout=timeout(120))
    figures = assert_no_loss(settings, sink)
    report(
        "1c pools and relay killed, Redis flushed, mid-drain",
        figures=figures,
        threads_killed=threads_killed,
        drain_s=drained,
    )
    assert figures.statuses == {"sent": n + codes}
    assert figures.duplicates <= threads_killed, figures.as_dict()
