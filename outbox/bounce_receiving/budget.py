"""How much one peer may send the bounce server (pure).

A token bucket per peer address, in bytes: it holds an hour's allowance and
refills at that rate, so a sender of real bounces, a few kilobytes now and
then, never notices it, and a peer that floods gets ``451`` until it slows
down. A peer's bucket is forgotten once it is full again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

_FORGET_ABOVE = 10_000  # buckets kept before full ones are dropped


@dataclass
class _Bucket:
    level: float
    at: float


class PeerBudget:
    def __init__(self, bytes_per_hour: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(bytes_per_hour)
        self.rate = bytes_per_hour / 3600.0
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def exhausted(self, peer: str) -> bool:
        """True while ``peer`` has nothing left (checked at MAIL, before any data)."""
        return self._level(peer) <= 0

    def take(self, peer: str, size: int) -> bool:
        """Spend ``size`` bytes of ``peer``'s allowance; False (nothing spent) if it is short."""
        level = self._level(peer)
        if size > level:
            return False
        self._buckets[peer] = _Bucket(level - size, self.clock())
        return True

    def _level(self, peer: str) -> float:
        now = self.clock()
        bucket = self._buckets.get(peer)
        if bucket is None:
            return self.capacity
        level = min(self.capacity, bucket.level + (now - bucket.at) * self.rate)
        if level >= self.capacity and len(self._buckets) > _FORGET_ABOVE:
            del self._buckets[peer]
        return level
