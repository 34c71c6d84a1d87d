"""The Dramatiq broker, built from Settings before any actor is declared."""

from __future__ import annotations

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import AgeLimit, Retries, TimeLimit

from outbox.config import Settings
from outbox.models import Priority
from outbox.telemetry.worker_metrics import add_worker_metrics


def queue_name(priority: Priority) -> str:
    return f"email_{priority.value}"


def make_broker(settings: Settings) -> RedisBroker:
    broker = RedisBroker(  # type: ignore[no-untyped-call]
        url=settings.redis_url, namespace=f"{settings.namespace}-dramatiq"
    )
    # The outbox row owns retries and age limits: a retry scheduled in Redis
    # would vanish with a Redis restart, one in Postgres does not. No time limit:
    # its asynchronous interrupt can land inside psycopg_pool and leak a connection.
    for middleware in list(broker.middleware):
        if isinstance(middleware, Retries | AgeLimit | TimeLimit):
            broker.middleware.remove(middleware)
    for priority in Priority:
        broker.declare_queue(queue_name(priority))
    return broker


def install(settings: Settings) -> RedisBroker:
    broker = make_broker(settings)
    add_worker_metrics(broker)  # only for a pool started with dramatiq_prom_db
    dramatiq.set_broker(broker)
    return broker
