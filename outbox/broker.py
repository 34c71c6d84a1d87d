"""The Dramatiq broker the relay publishes to and the workers consume from, by URL.

``OUTBOX_BROKER_URL`` (else ``REDIS_URL``) picks it: ``redis://`` (or
``redis+sentinel://``, :mod:`outbox.redis_clients`) for Redis, ``amqp://`` for
RabbitMQ, several node URLs separated by commas for a cluster (pika tries them
in turn on every connect and reconnect). RabbitMQ keeps what it was given across its own
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

from outbox.broker_urls import SENTINEL_SCHEMES, amqp_nodes
from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.models import Priority
from outbox.redis_clients import redis_client

REDIS_SCHEMES = frozenset({"redis", "rediss", "unix", *SENTINEL_SCHEMES})
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
    raise ConfigError(
        "OUTBOX_BROKER_URL must be a redis://, rediss://, unix://, redis+sentinel:// or amqp:// URL"
    )


def redis_namespace(namespace: str) -> str:
    """The prefix of Dramatiq's keys in Redis for OUTBOX_NAMESPACE ``namespace``."""
    return f"{namespace}-dramatiq"


def make_broker(settings: Settings) -> dramatiq.Broker:
    broker: dramatiq.Broker
    if broker_kind(settings.broker) == "rabbitmq":
        broker = _rabbitmq_broker(settings)
    else:
        # No command waits on the server (Dramatiq's fetch is a script): a reply
        # slower than this is a server gone without a word, not a slow one.
        client = redis_client(
            settings.broker,
            variable="OUTBOX_BROKER_URL" if settings.broker_url else "REDIS_URL",
            socket_connect_timeout=5,
            socket_timeout=30,
        )
        broker = RedisBroker(  # type: ignore[no-untyped-call]
            client=client, namespace=redis_namespace(settings.namespace)
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


def _rabbitmq_broker(settings: Settings) -> dramatiq.Broker:
    # pika on demand
    from outbox.rabbitmq_queues import NamespacedRabbitmqBroker, QuorumRabbitmqBroker  # noqa: PLC0415

    # Durable queues and persistent messages are Dramatiq's defaults for
    # RabbitMQ; confirms make enqueue return only once the broker has it.
    # Queue names carry OUTBOX_NAMESPACE, as Redis keys do.
    nodes = amqp_nodes(settings.broker)
    url = nodes if len(nodes) > 1 else nodes[0]
    if settings.rabbitmq_queue_type == "quorum":
        return QuorumRabbitmqBroker(
            namespace=settings.namespace,
            url=url,
            confirm_delivery=True,
            delivery_limit=settings.rabbitmq_delivery_limit,
        )
    return NamespacedRabbitmqBroker(namespace=settings.namespace, url=url, confirm_delivery=True)
