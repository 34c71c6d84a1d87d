"""Publishing relay batches as Dramatiq messages."""

from __future__ import annotations

from collections.abc import Sequence

import dramatiq
import dramatiq.errors
import redis
from opentelemetry import propagate

from outbox.broker import queue_name
from outbox.errors import BrokerError
from outbox.models import Priority

ACTOR_NAMES = {Priority.HIGH: "deliver_high", Priority.BULK: "deliver_bulk"}


class Publisher:
    """The relay's ``publish`` callable: no actor import needed, only names."""

    def __init__(self, broker: dramatiq.Broker) -> None:
        self.broker = broker

    def __call__(self, priority: Priority, groups: Sequence[Sequence[int]]) -> None:
        queue, actor = queue_name(priority), ACTOR_NAMES[priority]
        # The relay's current span travels in the message (W3C trace context).
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        options = {"otel": carrier} if carrier else {}
        for ids in groups:
            message: dramatiq.Message[None] = dramatiq.Message(
                queue_name=queue, actor_name=actor, args=(list(ids),), kwargs={}, options=options
            )
            try:
                self.broker.enqueue(message)
            except (redis.RedisError, dramatiq.errors.DramatiqError, OSError) as exc:
                # Translated here, at the edge: the relay knows no broker.
                raise BrokerError(f"could not publish to {queue}: {exc}") from exc
