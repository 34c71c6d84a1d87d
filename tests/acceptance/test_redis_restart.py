"""Scenario 3: Redis restarted without persistence while hundreds of messages are queued.

A private ``redis-server`` (no RDB, no AOF) is the broker. It is killed and
started again while the relay has filled its window: every queued broker
message is gone. Postgres still says ``queued``; the relay notices the new data
set and returns those rows at once (not after ``OUTBOX_STUCK_SECONDS``), login
codes first, and publishes them again.
"""

from __future__ import annotations

import dataclasses
import time

from outbox.config import Settings
from outbox.testing.sink import Behaviour
from tests.acceptance.checks import (
    CoreBug,
    add_emails,
    assert_no_loss,
    query,
    report,
    timeline,
    unfinished,
    wait_final,
    wait_until,
)
from tests.acceptance.conftest import Rig, child_env, scaled, spawn_relay, timeout
from tests.acceptance.servers import RedisServer

DOWNTIME = 1.5


class RelayDied(CoreBug):
    """The relay process exits on a Redis connection error instead of retrying."""


def _broker_messages(server: RedisServer, namespace: str) -> int:
    client = server.client()
    try:
        return sum(
            int(client.hlen(f"{namespace}-dramatiq:{queue}.msgs"))
            for queue in ("email_high", "email_bulk")
        )
    finally:
        client.close()


def test_redis_restart_loses_the_queues_and_the_sweeper_recovers(
    fault_settings: Settings, rig: Rig, private_redis: RedisServer
) -> None:
    settings = dataclasses.replace(
        fault_settings,
        redis_url=private_redis.url,
        # A threshold no run reaches: rows that come back came back without it.
        stuck_seconds=3600.0,
        max_in_flight=800,
        claim_batch=500,
        bulk_batch=2,
    )
    total = scaled(1500) + scaled(150) + 5
    add_emails(settings, scaled(1500), prefix="nl")
    add_emails(settings, scaled(150), prefix="hi", priority="high")
    sink = rig.sink(lambda _a: Behaviour(delay=0.002))
    p = rig.pipeline(child_env(settings, sink.url), high=(1, 2), bulk=(1, 4))

    wait_until(lambda: len(sink.messages) >= 100, timeout(30), "sending under way")
    lost_messages = _broker_messages(private_redis, settings.namespace)
    private_redis.stop()  # SIGKILL: the queues are gone
    # Login codes enqueued while Redis is away: the relay must try to publish them now.
    add_emails(settings, 5, prefix="down", priority="high")
    time.sleep(DOWNTIME)
    private_redis.start()
    restarted = time.monotonic()
    relay_died = p.procs["relay0"].poll() is not None
    if relay_died:  # as a process manager would: start it again, see the rest through
        spawn_relay(p, "relay0")
    queued_at_restart = dict(
        query(settings, "SELECT id, recipient FROM email_outbox WHERE status = 'queued'")
    )
    codes_at_restart = {
        r[0]
        for r in query(
            settings,
            "SELECT recipient FROM email_outbox WHERE priority = 'high' AND status <> 'sent'",
        )
    }
    sent_before = len(sink.messages)

    def recovered() -> bool:
        rows = query(
            settings,
            "SELECT count(*) FROM email_outbox WHERE id = ANY(%s) AND status <> 'sent'",
            sorted(queued_at_restart),
        )
        return rows[0][0] == 0

    try:
        recovery = wait_until(recovered, timeout(60), "rows queued at the restart sent", 0.1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {unfinished(settings)}") from None
    drained = wait_final(settings, total, timeout=timeout(60))
    figures = assert_no_loss(settings, sink)
    lost_recipients = set(queued_at_restart.values())
    first_resend = min(
        m.at - restarted
        for m in sink.messages
        if m.at > restarted and lost_recipients & set(m.recipients)
    )
    swept = query(
        settings,
        "SELECT count(DISTINCT outbox_id) FROM email_event WHERE reason LIKE 'swept: queued%%'",
    )[0][0]
    codes_sent_after = max(
        (m.at - restarted for m in sink.messages if codes_at_restart & set(m.recipients)),
        default=0.0,
    )
    # Newsletters sent after the restart, and how many of them went before the last
    # login code that was waiting.
    newsletters_after = [
        m.at - restarted
        for m in sink.messages
        if m.at > restarted and not codes_at_restart & set(m.recipients)
    ]
    ahead_of_codes = sum(1 for at in newsletters_after if at < codes_sent_after)
    assert lost_messages >= 100, "too few messages were queued for the restart to matter"
    assert swept > 0, "the sweeper returned nothing: were the queues really lost?"
    report(
        "3 Redis restart without persistence",
        figures=figures,
        broker_messages_lost=lost_messages,
        rows_queued_at_restart=len(queued_at_restart),
        rows_swept_back=swept,
        sent_before_restart=sent_before,
        first_resend_s=first_resend,
        login_codes_waiting_at_restart=len(codes_at_restart),
        last_login_code_sent_after_restart_s=codes_sent_after,
        newsletters_sent_after_restart=len(newsletters_after),
        newsletters_sent_before_the_last_login_code=ahead_of_codes,
        recovery_s=recovery,
        stuck_seconds=settings.stuck_seconds,
        drain_after_restart_s=time.monotonic() - restarted,
        drain_s=drained,
        sends_per_s_after_restart=timeline([m.at for m in sink.messages], restarted),
        relay_died=relay_died,
    )
    assert codes_at_restart, "no login code was waiting at the restart"
    assert ahead_of_codes < len(newsletters_after) / 2, (
        f"{ahead_of_codes} of {len(newsletters_after)} newsletters went before the login codes"
    )
    if relay_died:
        raise RelayDied(
            "the relay process exited when it could not publish to Redis "
            f"(see relay0.log in {rig.log_dir})"
        )
