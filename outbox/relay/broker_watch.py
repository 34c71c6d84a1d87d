"""What the broker still holds, and whether it lost everything since it was last asked.

A row ``queued`` in Postgres is only waiting while its Dramatiq message is in
Redis: in a queue, or prefetched by a live worker (both keep it in the
queue's ``.msgs`` hash until the worker acknowledges it). A message
prefetched by a Dramatiq worker that stopped beating is as good as lost (its
redelivery waits for Dramatiq's own maintenance), and so is every message of
a Redis that restarted without persistence or had its keys flushed: the
relay returns those rows at once instead of waiting for a threshold.

A restart is noticed by an epoch key the relays set in Redis: gone means the
data set is new.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

import orjson
import redis

from outbox.broker import queue_name, redis_namespace
from outbox.config import Settings
from outbox.errors import BrokerError

if TYPE_CHECKING:
    from outbox.models import Priority


class BrokerWatch:
    def __init__(
        self, client: redis.Redis, *, namespace: str, queues: Iterable[str], dead_after: float
    ) -> None:
        self.client = client
        self.namespace = namespace  # Dramatiq's: the keys below are its layout
        self.queues = list(queues)
        self.dead_after = dead_after  # seconds without a Dramatiq heartbeat: a dead consumer
        self._epoch_key = f"{namespace}:outbox-epoch"
        self._epoch: bytes | None = None

    def held_ids(self) -> set[int]:
        """Ids of the rows whose messages the broker holds for a live consumer or a queue."""
        try:
            return self._held()
        except redis.RedisError as exc:
            raise BrokerError(f"cannot ask the broker what it holds: {exc}") from exc

    def _held(self) -> set[int]:
        ns = self.namespace
        cutoff_ms = (time.time() - self.dead_after) * 1000
        found: list[bytes] = self.client.zrangebyscore(f"{ns}:__heartbeats__", 0, cutoff_ms)  # type: ignore[assignment]
        dead_workers = [w.decode() for w in found]
        held: set[int] = set()
        for queue in self.queues:
            abandoned: set[bytes] = set()
            for worker in dead_workers:
                members: set[bytes] = self.client.smembers(f"{ns}:__acks__.{worker}.{queue}")  # type: ignore[assignment]
                abandoned |= members
            for message_id, raw in self.client.hscan_iter(f"{ns}:{queue}.msgs", count=1000):
                if message_id in abandoned:
                    continue
                held.update(row_ids(raw))
        return held

    def restarted(self) -> bool:
        """True when the broker's data set is not the one seen last time (or at all).

        The first call of a relay answers True too: rows left queued by a broker
        that restarted while no relay ran are then returned at once.
        """
        try:
            current: bytes | None = self.client.get(self._epoch_key)  # type: ignore[assignment]
            if current is None:
                self.client.set(self._epoch_key, uuid.uuid4().hex.encode(), nx=True)
                current = self.client.get(self._epoch_key)  # type: ignore[assignment]
        except redis.RedisError as exc:
            raise BrokerError(f"cannot reach the broker: {exc}") from exc
        changed = current != self._epoch or current is None
        self._epoch = current
        return changed


def row_ids(raw: bytes) -> list[int]:
    """The row ids one encoded Dramatiq message carries (its first argument)."""
    try:
        message = orjson.loads(raw)
        ids = message["args"][0]
        return [int(i) for i in ids]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, ValueError):
        return []  # not one of ours


def broker_watch(
    settings: Settings, client: redis.Redis, priorities: Iterable[Priority]
) -> BrokerWatch:
    """The watch over the queues of ``priorities`` in the broker the settings name."""
    return BrokerWatch(
        client,
        namespace=redis_namespace(settings.namespace),
        queues=[queue_name(p) for p in priorities],
        dead_after=settings.stuck_seconds,
    )
