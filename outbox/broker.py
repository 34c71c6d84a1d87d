"""The Dramatiq broker the relay publishes to and the workers consume from, from Settings."""

from __future__ import annotations

from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import AgeLimit, Retries

from outbox.config import Settings
from outbox.models import Priority


def queue_name(priority: Priority) -> str:
    return f"email_{priority.value}"


def make_broker(settings: Settings) -> RedisBroker:
    broker = RedisBroker(  # type: ignore[no-untyped-call]
        url=settings.redis_url, namespace=f"{settings.namespace}-dramatiq"
    )
    # The outbox row owns retries and age limits: a retry scheduled in Redis
    # would vanish with a Redis restart, one in Postgres does not.
    for middleware in list(broker.middleware):
        if isinstance(middleware, Retries | AgeLimit):
            broker.middleware.remove(middleware)
    for priority in Priority:
        broker.declare_queue(queue_name(priority))
    return broker
