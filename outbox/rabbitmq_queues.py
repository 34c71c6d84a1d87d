"""Quorum queues for a RabbitMQ cluster (``OUTBOX_RABBITMQ_QUEUE_TYPE=quorum``).

Dramatiq's RabbitMQ broker declares classic queues; a cluster keeps a queue on
several nodes only as a quorum queue (classic mirrored queues are gone in
RabbitMQ 4). This broker changes only the arguments of the declarations: each
queue, its delay queue (``.DQ``) and its dead-letter queue (``.XQ``) is a
durable quorum queue.

A quorum queue drops a message redelivered more than its delivery limit
unless it dead-letters it, so the queue and the delay queue dead-letter into
``.XQ`` at least once (the message leaves only when ``.XQ`` has it), and the
relay returns the rows of what lands there to Postgres
(:mod:`outbox.relay.dead_letters`): a message over the limit is published
again from its row, never lost.
"""

from __future__ import annotations

from typing import Any

from dramatiq.brokers.rabbitmq import DEAD_MESSAGE_TTL, RabbitmqBroker
from dramatiq.common import xq_name


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


class QuorumRabbitmqBroker(RabbitmqBroker):
    """Dramatiq's RabbitMQ broker, declaring quorum queues."""

    def __init__(self, *, delivery_limit: int, **options: Any) -> None:
        super().__init__(**options)
        self.delivery_limit = delivery_limit

    def _build_queue_arguments(self, queue_name: str) -> dict[str, Any]:
        arguments: dict[str, Any] = super()._build_queue_arguments(queue_name)  # type: ignore[no-untyped-call]
        return {**arguments, **quorum_arguments(self.delivery_limit)}

    def _declare_xq_queue(self, queue_name: str) -> Any:
        return self.channel.queue_declare(
            queue=xq_name(queue_name), durable=True, arguments=dead_letter_arguments()
        )
