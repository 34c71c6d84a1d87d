"""The health of each part, as ``outbox status`` shows it: Postgres, the broker,
the transport's breaker, and the last heartbeat of every relay and worker process.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from outbox.broker import broker_kind, queue_name, redis_namespace
from outbox.broker_urls import amqp_nodes
from outbox.config import Settings
from outbox.db.store import breaker_rows, connections, processes
from outbox.errors import StoreError
from outbox.models import Priority
from outbox.redis_clients import redis_client


@dataclass
class Health:
    postgres: dict[str, Any] = field(default_factory=dict)
    broker: dict[str, Any] = field(default_factory=dict)
    transports: list[dict[str, Any]] = field(default_factory=list)
    # Each transport's last attempt and send (a closed breaker keeps no row).
    sends: list[dict[str, Any]] = field(default_factory=list)
    processes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.postgres.get("up", False)
            and self.broker.get("up", False)
            and not any(t["state"] == "open" for t in self.transports)
            and not any(p["silent"] for p in self.processes)
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def broker_health(settings: Settings) -> dict[str, Any]:
    """Whether the broker answers, and the messages waiting in each queue."""
    if broker_kind(settings.broker) == "rabbitmq":
        return _rabbitmq_health(settings.broker, settings.namespace)
    client = redis_client(settings.broker, socket_connect_timeout=2, socket_timeout=2)
    namespace = redis_namespace(settings.namespace)
    started = time.perf_counter()
    try:
        client.ping()
        queues = {
            queue_name(p): int(client.hlen(f"{namespace}:{queue_name(p)}.msgs")) for p in Priority
        }
    except redis.RedisError as exc:
        return {"up": False, "error": str(exc)}
    finally:
        client.close()
    return {"up": True, "latency_ms": (time.perf_counter() - started) * 1000, "messages": queues}


def gather(settings: Settings, conn: connections.Conn | None, error: str = "") -> Health:
    """Everything ``outbox status`` reports about health; ``conn`` None: Postgres is away."""
    health = Health(broker=broker_health(settings))
    if conn is None:
        health.postgres = {"up": False, "error": error}
        return health
    started = time.perf_counter()
    try:
        connections.ping(conn)
        latency = (time.perf_counter() - started) * 1000
        breakers = breaker_rows.list_breakers(conn)
        sends = breaker_rows.last_sends(conn)
        beats = processes.list_processes(conn)
    except StoreError as exc:
        health.postgres = {"up": False, "error": str(exc)}
        return health
    health.postgres = {"up": True, "latency_ms": latency}
    for row in breakers:
        state = row.state
        health.transports.append(
            {
                "transport": state.transport,
                "state": state.state,
                "failures": state.failures,
                "down_since": state.opened_at.isoformat() if state.opened_at else None,
                "last_error": state.last_error,
                "changed_seconds_ago": round(row.changed_seconds_ago, 1),
            }
        )
    health.sends = [
        {
            "transport": s.transport,
            "last_attempt_seconds_ago": round(s.attempted_seconds_ago, 1),
            "last_sent_seconds_ago": None
            if s.sent_seconds_ago is None
            else round(s.sent_seconds_ago, 1),
            "last_verdict": s.verdict,
        }
        for s in sends
    ]
    for beat in beats:
        health.processes.append(
            {
                "name": beat.name,
                "kind": beat.kind,
                "detail": beat.detail,
                "last_beat_seconds_ago": round(beat.silent_seconds, 1),
                "silent": beat.silent_seconds > settings.stuck_seconds,
            }
        )
    return health


def _rabbitmq_health(url: str, namespace: str) -> dict[str, Any]:
    import pika  # noqa: PLC0415 (only for a RabbitMQ broker)
    import pika.exceptions  # noqa: PLC0415

    from outbox.rabbitmq_queues import wire_name  # noqa: PLC0415

    started = time.perf_counter()
    nodes = [pika.URLParameters(node) for node in amqp_nodes(url)]  # a cluster's, in turn
    for parameters in nodes:
        parameters.socket_timeout = 2
        parameters.blocked_connection_timeout = 2
    try:
        connection = pika.BlockingConnection(nodes)
    except pika.exceptions.AMQPError as exc:
        return {"up": False, "error": type(exc).__name__}
    try:
        queues = {}
        for p in Priority:
            queues[queue_name(p)] = _rabbitmq_depth(connection, wire_name(namespace, queue_name(p)))
    except pika.exceptions.AMQPError as exc:
        return {"up": False, "error": type(exc).__name__}
    finally:
        if connection.is_open:
            connection.close()
    return {"up": True, "latency_ms": (time.perf_counter() - started) * 1000, "messages": queues}


def _rabbitmq_depth(connection: Any, queue: str) -> int:
    """Messages ready in ``queue``; 0 when no process has declared it yet (a fresh vhost)."""
    import pika.exceptions  # noqa: PLC0415

    channel = connection.channel()  # a channel each: the broker closes one on a missing queue
    quiet = _MissingQueueQuiet()
    channel_log = logging.getLogger("pika.channel")
    channel_log.addFilter(quiet)  # the 404 is an answer here, not a warning
    try:
        declared = channel.queue_declare(queue=queue, durable=True, passive=True)
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code == 404:  # AMQP NOT_FOUND
            return 0
        raise
    finally:
        channel_log.removeFilter(quiet)
    count = int(declared.method.message_count)
    channel.close()
    return count


class _MissingQueueQuiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "NOT_FOUND - no queue" not in record.getMessage()
