"""``outbox relay``: publish due rows to the broker and sweep stuck ones, until stopped."""

from __future__ import annotations

import argparse

from outbox.broker import broker_kind, make_broker
from outbox.cli.output import Done, Printer, Result
from outbox.cli.stop_signals import stop_on_signals
from outbox.config import Settings
from outbox.db.store import connections
from outbox.models import Priority
from outbox.relay.broker_watch import broker_watch
from outbox.relay.dead_letters import dead_letters
from outbox.relay.domain_recheck import DomainRecheck
from outbox.relay.loop import Relay
from outbox.relay.publish import Publisher
from outbox.relay.retention import Retention
from outbox.telemetry import liveness
from outbox.telemetry.log_once import quiet_broker_client_logs, quiet_pool_logs
from outbox.telemetry.setup import setup_tracing


def relay(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    setup_tracing("outbox-relay")
    quiet_pool_logs()
    quiet_broker_client_logs()
    stop = stop_on_signals()
    if settings.retention_days:
        Retention(settings, stop).start()
    DomainRecheck(settings, stop).start()  # DNS at start and daily, beside the loop
    with connections.Pool(
        settings.database_url,
        name="outbox-relay",
        max_size=2,
        prepare=settings.prepared_statements == "on",
        timeout=settings.pool_timeout,
    ) as pool:
        priorities = sorted({Priority(p) for p in args.priority or ("high", "bulk")})
        broker = make_broker(settings)
        # Redis can be asked what it holds and whether it restarted; RabbitMQ's
        # durable queues keep what they were given, so nothing needs watching.
        watch = (
            broker_watch(settings, broker.client, priorities)  # type: ignore[attr-defined]
            if broker_kind(settings.broker) == "redis"
            else None
        )
        # RabbitMQ dead-letters what it will not deliver (a quorum queue's delivery
        # limit); the relay returns those rows to Postgres.
        dead = (
            dead_letters(settings, priorities)
            if broker_kind(settings.broker) == "rabbitmq"
            else None
        )
        relay = Relay(
            settings, pool, Publisher(broker), priorities=priorities, watch=watch, dead_letters=dead
        )
        name = f"relay-{priorities[0].value}" if len(priorities) == 1 else "relay"
        reporter = liveness.Reporter(
            settings, name, relay.stalled, stale_after=liveness.STALE_AFTER
        ).start()
        try:
            relay.run(stop)
        finally:
            reporter.stop()
    return Done()
