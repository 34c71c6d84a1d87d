"""Thin send actors: one per queue, both calling :mod:`outbox.delivery.deliver`."""

from __future__ import annotations

import threading
from functools import cache
from typing import Any

import dramatiq

from outbox.broker import queue_name
from outbox.config import default_settings
from outbox.db.store import connections
from outbox.delivery.deliver import Delivery
from outbox.models import Priority
from outbox.pacing.pacer import pacer_for
from outbox.telemetry import liveness
from outbox.telemetry.log_once import quiet_pool_logs
from outbox.transports.select import build_transport
from outbox.worker.heartbeat import Heartbeat

# Set by the shutdown middleware; a batch in progress hands back what it has
# not tried instead of outliving the platform's grace period.
stopping = threading.Event()


@cache
def delivery() -> Delivery:
    """Per process (created after the worker forks): pool, transport, templates."""
    settings = default_settings()
    quiet_pool_logs()
    pool = connections.Pool(
        settings.database_url,
        name="outbox-worker",
        max_size=settings.db_pool_max,
        prepare=settings.prepared_statements == "on",
        timeout=settings.pool_timeout,
    )
    transport = build_transport(settings)  # OUTBOX_TRANSPORT: SMTP or an HTTP provider
    pacer = pacer_for(settings)  # OUTBOX_RATE_LIMITS, OUTBOX_SEND_RATE: shared through Redis
    return Delivery(settings, pool, transport, stopping=stopping, pacer=pacer)


# No max_retries: the Retries middleware is removed (outbox.broker), the row owns
# retries. No time limit either (the TimeLimit middleware is removed too): an interrupt
# raised inside psycopg_pool's wait leaks the connection handed over meanwhile. Every
# step is bounded by its own timeout instead (transport, OUTBOX_POOL_TIMEOUT).


@dramatiq.actor(queue_name=queue_name(Priority.HIGH), actor_name="deliver_high")
def deliver_high(ids: list[int]) -> None:
    delivery().deliver(ids)


@dramatiq.actor(queue_name=queue_name(Priority.BULK), actor_name="deliver_bulk")
def deliver_bulk(ids: list[int]) -> None:
    delivery().deliver(ids)


@cache
def heartbeat() -> Heartbeat:
    return Heartbeat(default_settings(), delivery().pool, in_hand=delivery().in_hand)


def warm_up() -> None:
    """Open the pool and compile every template before the first message."""
    heartbeat().start()
    templates = delivery().templates
    for name in templates.names():
        templates.get(name)


def leave() -> None:
    """At a clean stop: results still on their way reach Postgres, then the
    heartbeat ends and the process leaves the list (before that, a sweep could
    take the rows whose results were still being written)."""
    if delivery.cache_info().currsize:  # not made just to be closed
        # Batches waited for their results, so this is quick; if Postgres is
        # away, 3 s more keeps the 25 s shutdown timeout inside a platform's
        # 30 s grace; rows whose results are left are swept once the process is silent.
        delivery().close(timeout=3.0)
    heartbeat().stop()


_reporters: list[liveness.Reporter] = []


def report_liveness(worker: Any) -> None:
    """Keep this pool process's liveness file: its Dramatiq threads alive and its
    heartbeat beating (``worker-high`` or ``worker-bulk``, by the queues it consumes)."""
    pools = [q.removeprefix("email_") for q in heartbeat().queues]
    name = "worker-" + "-".join(pools or ["high", "bulk"])

    def check() -> str | None:
        threads = [*worker.workers, *worker.consumers.values()]
        dead = sum(1 for t in threads if not t.is_alive())
        if dead:
            return f"{dead} of its {len(threads)} Dramatiq threads have stopped"
        return heartbeat().silence()

    reporter = liveness.Reporter(default_settings(), name, check, stale_after=liveness.STALE_AFTER)
    _reporters.append(reporter.start())


def stop_reporting() -> None:
    while _reporters:
        _reporters.pop().stop()
