"""The Dramatiq broker the relay publishes to and the workers consume from, by URL.

``OUTBOX_BROKER_URL`` (else ``REDIS_URL``) picks it: ``redis://`` for Redis,
``amqp://`` for RabbitMQ. RabbitMQ keeps what it was given across its own
restart: durable queues, persistent messages, and publisher confirms, so the
relay commits a claim only after the broker has the message (Dramatiq's
``confirm_delivery``). Redis without persistence loses its queues on a restart;
the rows stay in Postgres and the relay and the sweeper publish them again.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import AgeLimit, Retries, TimeLimit

from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.models import Priority

REDIS_SCHEMES = frozenset({"redis", "rediss", "unix"})
AMQP_SCHEMES = frozenset({"amqp", "amqps"})


def queue_name(priority: Priority) -> str:
    return f"email_{priority.value}"


def broker_kind(url: str) -> str:
    """``redis`` or ``rabbitmq``; a ConfigError for anything else."""
    try:
        scheme = urlsplit(url).scheme
    except ValueError:
        scheme = ""
    if scheme in REDIS_SCHEMES:
        return "redis"
    if scheme in AMQP_SCHEMES:
        return "rabbitmq"
    raise ConfigError("OUTBOX_BROKER_URL must be a redis://, rediss://, unix:// or amqp:// URL")


def redis_namespace(namespace: str) -> str:
    """The prefix of Dramatiq's keys in Redis for OUTBOX_NAMESPACE ``namespace``."""
    return f"{namespace}-dramatiq"


def make_broker(settings: Settings) -> dramatiq.Broker:
    broker: dramatiq.Broker
    if broker_kind(settings.broker) == "rabbitmq":
        from outbox.rabbitmq_queues import NamespacedRabbitmqBroker  # noqa: PLC0415 (pika on demand)

        # Durable queues and persistent messages are Dramatiq's defaults for
        # RabbitMQ; confirms make enqueue return only once the broker has it.
        # Queue names carry OUTBOX_NAMESPACE, as Redis keys do.
        broker = NamespacedRabbitmqBroker(
            namespace=settings.namespace, url=settings.broker, confirm_delivery=True
        )
    else:
        broker = RedisBroker(  # type: ignore[no-untyped-call]
            url=settings.broker, namespace=redis_namespace(settings.namespace)
        )
    # The outbox row owns retries and age limits: a retry scheduled in the
    # broker would vanish with a Redis restart, one in Postgres does not. No time
    # limit: its asynchronous interrupt can land inside psycopg_pool and leak a
    # connection.
    for middleware in list(broker.middleware):
        if isinstance(middleware, Retries | AgeLimit | TimeLimit):
            broker.middleware.remove(middleware)
    for priority in Priority:
        broker.declare_queue(queue_name(priority))
    return broker
