"""Scenario 9: send-side safety.

A broker message delivered twice (or published for a row that is no longer
``queued``) is acknowledged without sending. One email that cannot be
rendered must not take the rest of its batch down with it. The history check
of every scenario (no row both ``sent`` and retried unless an ``uncertain``
attempt explains it) lives in :func:`tests.acceptance.checks.check_history`.
"""

from __future__ import annotations

import dataclasses

import psycopg
import redis

from outbox import enqueue
from outbox.broker import make_broker
from outbox.config import Settings
from outbox.models import Priority
from outbox.relay.publish import Publisher
from tests.acceptance.checks import (
    CoreBug,
    add_emails,
    assert_no_loss,
    query,
    report,
    statuses,
    wait_final,
    wait_until,
)
from tests.acceptance.conftest import Rig, child_env, scaled, timeout


def _broker_backlog(client: redis.Redis, namespace: str) -> dict[str, int]:
    prefix = f"{namespace}-dramatiq"
    found = {}
    for queue in ("email_high", "email_bulk"):
        found[queue] = int(client.hlen(f"{prefix}:{queue}.msgs"))
        found[f"{queue} dead-lettered"] = int(client.zcard(f"{prefix}:{queue}.XQ"))
    return found


def test_duplicate_broker_deliveries_are_acknowledged_without_sending(
    fault_settings: Settings, rig: Rig, redis_client: redis.Redis
) -> None:
    settings = dataclasses.replace(fault_settings, stuck_seconds=60.0, max_in_flight=5000)
    n = scaled(500)
    add_emails(settings, n, prefix="nl")
    add_emails(settings, scaled(50), prefix="hi", priority="high")
    total = n + scaled(50)
    sink = rig.sink()
    env = child_env(settings, sink.url)
    relay_only = rig.pipeline(env, high=(0, 0), bulk=(0, 0))
    wait_until(lambda: statuses(settings) == {"queued": total}, timeout(30), "all queued")
    relay_only.stop()

    # Every row published a second time, grouped differently, before any worker runs.
    broker = make_broker(settings)
    publish = Publisher(broker)
    ids = {
        priority: [
            r[0]
            for r in query(
                settings,
                "SELECT id FROM email_outbox WHERE priority = %s ORDER BY id DESC",
                priority,
            )
        ]
        for priority in ("high", "bulk")
    }
    publish(Priority.HIGH, [[i] for i in ids["high"]])
    publish(Priority.BULK, [ids["bulk"][i : i + 7] for i in range(0, len(ids["bulk"]), 7)])
    rig.pipeline(env, relays=0, high=(1, 4), bulk=(1, 8))
    wait_final(settings, total, timeout=timeout(60))
    # And again once everything is sent: a late redelivery.
    publish(Priority.HIGH, [[i] for i in ids["high"]])
    publish(Priority.BULK, [ids["bulk"][i : i + 25] for i in range(0, len(ids["bulk"]), 25)])
    broker.close()
    wait_until(
        lambda: not any(_broker_backlog(redis_client, settings.namespace).values()),
        timeout(30),
        "every duplicate message acknowledged",
    )
    figures = assert_no_loss(settings, sink, allow_duplicates=False)
    assert figures.copies == total
    assert figures.attempts == total
    report(
        "9 duplicate broker deliveries",
        figures=figures,
        broker_messages_per_row=3,
        backlog_after=_broker_backlog(redis_client, settings.namespace),
    )


class PoisonTakesBatchDown(CoreBug):
    """An email that fails to render aborts its whole batch."""


def test_an_email_that_cannot_be_rendered_does_not_take_its_batch_down(
    fault_settings: Settings, rig: Rig
) -> None:
    settings = dataclasses.replace(fault_settings, max_attempts=3, bulk_batch=25)
    n = scaled(50)
    add_emails(settings, n, prefix="nl")
    with psycopg.connect(settings.database_url) as conn:
        poison = enqueue(
            conn,
            idempotency_key="poison",
            to="poison@example.com",
            template="order_confirmation",
            params={"name": "A", "order_number": "1", "total": "1.00", "items": []},
            priority="bulk",
            settings=settings,
        )
        # enqueue refuses params of the wrong shape now (InvalidParams); a row
        # can still get one from before that check, or from a template edited
        # since: the worker must survive it.
        conn.execute(
            "UPDATE email_outbox SET params = jsonb_set(params, '{items}', '5') WHERE id = %s",
            (poison.id,),
        )
        conn.commit()
    add_emails(settings, scaled(50), prefix="after")
    total = 2 * n + 1
    sink = rig.sink()
    rig.pipeline(child_env(settings, sink.url), high=(0, 0), bulk=(1, 8))
    drained = wait_final(settings, total, timeout=timeout(90))
    row = query(
        settings, "SELECT status, attempts, last_error FROM email_outbox WHERE id = %s", poison.id
    )[0]
    figures = assert_no_loss(settings, sink, expect=("sent", "failed", "dead"))
    healthy_not_sent = query(
        settings,
        "SELECT count(*) FROM email_outbox WHERE id <> %s AND status <> 'sent'",
        poison.id,
    )[0][0]
    healthy_uncertain = query(
        settings,
        "SELECT count(*) FROM email_attempt WHERE outbox_id <> %s AND verdict = 'uncertain'",
        poison.id,
    )[0][0]
    report(
        "9 an email that cannot be rendered",
        figures=figures,
        poison_row=row[:2],
        poison_error=(row[2] or "")[:80],
        healthy_emails_not_sent=healthy_not_sent,
        healthy_uncertain_attempts=healthy_uncertain,
        drain_s=drained,
    )
    if healthy_not_sent or healthy_uncertain or figures.duplicates:
        raise PoisonTakesBatchDown(
            f"one unrenderable email: {healthy_not_sent} healthy emails never sent "
            f"({figures.statuses}), {healthy_uncertain} uncertain attempts and "
            f"{figures.duplicates} duplicates among its batch mates; it ended {row[:2]}"
        )
