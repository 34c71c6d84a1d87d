"""Scenario 2: relays killed with SIGKILL mid-batch, and two relays racing.

A relay commits its claim only after publishing, so one killed while
publishing leaves messages in Redis for rows that are still ``pending``. The
first part makes that window certain: the relay is killed the moment its first
message reaches Redis. The second part runs two relays side by side while one
of them is killed again and again. With no other fault, every email must
reach the SMTP server exactly once.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import signal
import socket
import time
from pathlib import Path

import redis

from outbox.config import Settings
from outbox.rabbitmq_queues import wire_name
from tests.acceptance.checks import (
    add_emails,
    assert_no_loss,
    query,
    report,
    statuses,
    wait_final,
    wait_until,
)
from tests.acceptance.conftest import Rig, child_env, scaled, spawn_relay, timeout
from tests.rabbitmq import depth

SKIPPED = re.compile(rb"skipped (\d+) of \d+ rows already taken or finished")


def _queued_messages(settings: Settings, client: redis.Redis) -> int:
    """Messages the broker holds for the two queues."""
    queues = ("email_high", "email_bulk")
    if settings.broker_url.startswith("amqp"):
        return sum(
            depth(settings.broker_url, wire_name(settings.namespace, queue), missing=0)
            for queue in queues
        )
    return sum(int(client.hlen(f"{settings.namespace}-dramatiq:{queue}.msgs")) for queue in queues)


def _skipped_rows(log_dir: Path) -> int:
    return sum(
        int(n) for log in log_dir.glob("email_*.log") for n in SKIPPED.findall(log.read_bytes())
    )


def test_relays_killed_mid_batch_and_racing_send_each_email_once(
    broker_settings: Settings, rig: Rig, redis_client: redis.Redis
) -> None:
    # Long sweeper threshold: only the relays' own behaviour is under test here.
    settings = dataclasses.replace(
        broker_settings, stuck_seconds=30.0, claim_batch=200, bulk_batch=2, max_in_flight=400
    )
    total = scaled(1500) + scaled(150)
    add_emails(settings, scaled(1500), prefix="nl")
    add_emails(settings, scaled(150), prefix="hi", priority="high")
    sink = rig.sink()
    p = rig.pipeline(child_env(settings, sink.url), relays=0, high=(0, 0), bulk=(0, 0))

    # Part 1: frozen (SIGSTOP) the moment a message of its batch is in Redis, then
    # killed. A relay that managed to commit before the freeze does not count.
    mid_batch_kills = 0
    stale_messages = 0
    for _ in range(6):
        proc = spawn_relay(p, "relay0")
        deadline = time.monotonic() + timeout(30)
        while _queued_messages(settings, redis_client) <= stale_messages:
            assert time.monotonic() < deadline, "the relay never published"
        os.kill(proc.pid, signal.SIGSTOP)
        mid_batch = statuses(settings) == {"pending": total}  # its claim never committed
        p.kill("relay0", signal.SIGKILL)
        stale_messages = _queued_messages(settings, redis_client)
        if not mid_batch:
            break  # rows were claimed for good: the racing part takes it from here
        mid_batch_kills += 1
        if mid_batch_kills == 3:
            break
    assert mid_batch_kills > 0, "never caught a relay between publishing and committing"
    assert stale_messages > 0

    # Part 2: two relays racing, one of them killed again and again.
    env = child_env(settings, sink.url)
    p2 = rig.pipeline(env, relays=2, high=(1, 4), bulk=(1, 8))
    rng = random.Random(7)
    kills = 0
    host = socket.gethostname()
    while kills < 6 and statuses(settings).get("sent", 0) < total:
        victim = f"relay{kills % 2}"
        actor = f"relay:{host}:{p2.procs[victim].pid}"
        # Killed while at work: once it has claimed rows, at a random moment after.
        wait_until(
            lambda actor=actor: (
                bool(query(settings, "SELECT 1 FROM email_event WHERE actor = %s LIMIT 1", actor))
                or statuses(settings).get("sent", 0) == total
            ),
            timeout(30),
            f"{victim} claiming",
            interval=0.02,
        )
        time.sleep(rng.uniform(0.0, 0.4))
        p2.kill(victim, signal.SIGKILL)
        kills += 1
        spawn_relay(p2, victim)
    drained = wait_final(settings, total, timeout=timeout(60))
    figures = assert_no_loss(settings, sink, allow_duplicates=False)

    claims = query(settings, "SELECT count(*) FROM email_event WHERE to_status = 'queued'")[0][0]
    relays = query(
        settings, "SELECT count(DISTINCT actor) FROM email_event WHERE to_status = 'queued'"
    )[0][0]
    assert figures.copies == total  # each email at the SMTP server exactly once
    assert figures.attempts == total  # and tried exactly once
    assert claims == total  # no row claimed (published and committed) twice
    assert relays >= 2
    skipped = _skipped_rows(rig.log_dir)
    report(
        "2 relay SIGKILL mid-batch, two relays racing",
        figures=figures,
        mid_batch_kills=mid_batch_kills,
        stale_broker_messages=stale_messages,
        racing_relay_kills=kills,
        relay_processes_that_claimed=relays,
        stale_rows_skipped_by_workers=skipped,
        drain_s=drained,
    )
