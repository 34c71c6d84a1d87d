"""Deleting a namespace's keys from Redis, and its queues from RabbitMQ, for runs
that own their namespace (the demo, the benchmarks): nothing outside it is touched."""

from __future__ import annotations

import pika.exceptions
import redis

from outbox.broker import broker_kind, queue_name, redis_namespace
from outbox.config import Settings
from outbox.models import Priority
from outbox.redis_clients import redis_client


def drop_namespace(settings: Settings, namespace: str) -> list[str]:
    """Delete ``namespace``'s keys and the broker's (``redis_namespace``) from
    Redis and, when it is Redis, the broker (RabbitMQ: its queues of the
    namespace); the patterns left, with why."""
    urls = {settings.redis_url}
    left: list[str] = []
    if broker_kind(settings.broker) == "redis":
        urls.add(settings.broker)
    else:
        from outbox.rabbitmq_queues import delete_queues  # noqa: PLC0415 (pika on demand)

        queues = [queue_name(p) for p in Priority]
        try:
            delete_queues(settings.broker, namespace, queues)
        except pika.exceptions.AMQPError as exc:
            left.append(f"RabbitMQ queues {namespace}.* ({type(exc).__name__})")
    for url in sorted(urls):
        client = redis_client(url, socket_timeout=5, socket_connect_timeout=5)
        try:
            for pattern in (f"{namespace}:*", f"{redis_namespace(namespace)}:*"):
                try:
                    keys = list(client.scan_iter(match=pattern, count=500))
                    if keys:
                        client.delete(*keys)
                except redis.RedisError as exc:
                    left.append(f"{pattern} ({type(exc).__name__})")
        finally:
            client.close()
    return left
