"""Dramatiq's RabbitMQ broker with its queues named in OUTBOX_NAMESPACE.

Dramatiq names a RabbitMQ queue after its actor's queue (``email_high``) and
has no prefix, as it has for Redis keys. Two outboxes on one vhost would then
consume each other's messages: a relay of one would hand its row ids to the
other's workers. Inside the process the queues keep Dramatiq's names (the
actors, ``-Q email_high``, the metrics); on the wire each is
``<namespace>.<queue>``, its delay and dead-letter queues with it. The outbox
never delays a message in the broker (retries wait in Postgres), so a delayed
enqueue is refused rather than half-supported.

``OUTBOX_RABBITMQ_QUEUE_TYPE=quorum`` (:class:`QuorumRabbitmqBroker`) makes each
queue, its delay queue (``.DQ``) and its dead-letter queue (``.XQ``) a
durable quorum queue, kept on several nodes of a cluster (classic mirrored
queues are gone in RabbitMQ 4). A quorum queue drops a message redelivered
more than its delivery limit unless it dead-letters it, so the queue and the
delay queue dead-letter into ``.XQ`` at least once (the message leaves only
when ``.XQ`` has it), and the relay returns the rows of what lands there to
Postgres (:mod:`outbox.relay.dead_letters`): a message over the limit is
published again from its row, never lost.
"""

from __future__ import annotations

from typing import Any

import dramatiq
import pika
import pika.exceptions
from dramatiq.brokers.rabbitmq import DEAD_MESSAGE_TTL, RabbitmqBroker, _RabbitmqConsumer
from dramatiq.common import xq_name
from dramatiq.errors import ConnectionClosed

from outbox.broker_urls import amqp_nodes

# Dramatiq's own limit for a publish that meets a closed connection.
_PUBLISH_ATTEMPTS = 6


def wire_name(namespace: str, queue: str) -> str:
    """The RabbitMQ queue that holds Dramatiq queue ``queue`` for OUTBOX_NAMESPACE ``namespace``."""
    return f"{namespace}.{queue}"


def delete_queues(url: str, namespace: str, queues: list[str]) -> None:
    """Delete ``namespace``'s RabbitMQ queues for ``queues`` (each with its .DQ and .XQ)."""
    connection = pika.BlockingConnection([pika.URLParameters(node) for node in amqp_nodes(url)])
    try:
        channel = connection.channel()
        for queue in queues:
            for name in (queue, f"{queue}.DQ", f"{queue}.XQ"):
                channel.queue_delete(queue=wire_name(namespace, name))
    finally:
        connection.close()


class NamespacedRabbitmqBroker(RabbitmqBroker):
    def __init__(self, *, namespace: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.namespace = namespace

    def wire(self, queue: str) -> str:
        return wire_name(self.namespace, queue)

    @property
    def consumer_class(self) -> type[_RabbitmqConsumer]:
        return _NamespacedConsumer

    # The three declarations name the queue on the wire; the arguments built
    # from that name (the dead-letter routing key) follow it.
    def _declare_queue(self, queue_name: str) -> Any:
        return super()._declare_queue(self.wire(queue_name))  # type: ignore[no-untyped-call]

    def _declare_dq_queue(self, queue_name: str) -> Any:
        return super()._declare_dq_queue(self.wire(queue_name))  # type: ignore[no-untyped-call]

    def _declare_xq_queue(self, queue_name: str) -> Any:
        return super()._declare_xq_queue(self.wire(queue_name))  # type: ignore[no-untyped-call]

    def flush(self, queue_name: str) -> None:
        for name in (queue_name, f"{queue_name}.DQ", f"{queue_name}.XQ"):
            try:
                self.channel.queue_purge(self.wire(name))
            except pika.exceptions.AMQPChannelError:
                del self.channel

    def enqueue(self, message: dramatiq.Message[Any], *, delay: int | None = None) -> Any:
        """Publish ``message`` to its queue's wire name, as Dramatiq's enqueue does."""
        if delay is not None:
            raise ValueError("the outbox delays in Postgres, never in the broker")
        queue = message.queue_name
        for attempt in range(1, _PUBLISH_ATTEMPTS + 1):
            try:
                self.declare_queue(queue, ensure=True)
                self.emit_before("enqueue", message, delay)
                self.channel.basic_publish(
                    exchange="",
                    routing_key=self.wire(queue),
                    body=message.encode(),
                    properties=pika.BasicProperties(
                        delivery_mode=2, priority=message.options.get("broker_priority")
                    ),
                    # Unroutable is an error only with confirms (RabbitMQ's rule).
                    mandatory=self.confirm_delivery,
                )
                self.emit_after("enqueue", message, delay)
                return message
            except (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError) as e:
                del self.connection  # the next attempt opens new ones
                if isinstance(e, pika.exceptions.UnroutableError):
                    self.queues_pending.add(queue)  # deleted meanwhile: declare it again
                if attempt == _PUBLISH_ATTEMPTS:
                    raise ConnectionClosed(e) from None  # type: ignore[no-untyped-call]
        raise AssertionError("unreachable")  # pragma: no cover


def quorum_arguments(delivery_limit: int) -> dict[str, Any]:
    """The arguments that make a queue a quorum queue that dead-letters, never drops."""
    return {
        "x-queue-type": "quorum",
        "x-delivery-limit": delivery_limit,
        # At-least-once dead-lettering needs publishes refused, not old messages
        # dropped, when a length limit is reached (none is set).
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
    }


def dead_letter_arguments() -> dict[str, Any]:
    """The ``.XQ`` queue's: a quorum queue too, kept as long as Dramatiq keeps it."""
    return {"x-queue-type": "quorum", "x-message-ttl": DEAD_MESSAGE_TTL}


class QuorumRabbitmqBroker(NamespacedRabbitmqBroker):
    """The namespaced broker, declaring quorum queues."""

    def __init__(self, *, delivery_limit: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delivery_limit = delivery_limit

    def _build_queue_arguments(self, queue_name: str) -> dict[str, Any]:
        arguments: dict[str, Any] = super()._build_queue_arguments(queue_name)  # type: ignore[no-untyped-call]
        return {**arguments, **quorum_arguments(self.delivery_limit)}

    def _declare_xq_queue(self, queue_name: str) -> Any:
        return self.channel.queue_declare(
            queue=xq_name(self.wire(queue_name)), durable=True, arguments=dead_letter_arguments()
        )


class _NamespacedConsumer(_RabbitmqConsumer):
    def __init__(
        self, broker: NamespacedRabbitmqBroker, queue_name: str, prefetch: int, timeout: int
    ) -> None:
        super().__init__(broker, broker.wire(queue_name), prefetch, timeout)  # type: ignore[no-untyped-call]
        # Dramatiq's name again: a queue found missing is declared by it.
        self.queue_name = queue_name
