"""A token bucket per key (pure: the caller passes the time).

Each key may make ``rate`` requests per second on average and ``burst`` at
once; past that the answer is 429 with the seconds to wait. Buckets live in
the ``outbox web`` process: with N processes behind a load balancer a key gets
up to N times the rate. The keys are API keys' ids (requests per key) or
client addresses (failed authentications per client).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable

# Past this many buckets, those refilled to the full burst are forgotten (they
# hold nothing a fresh bucket would not): many client addresses cost no memory.
_PRUNE_ABOVE = 10_000


class RateLimiter:
    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = max(burst, 1.0)
        self._buckets: dict[Hashable, tuple[float, float]] = {}  # key: (tokens, at)
        self._lock = threading.Lock()

    def take(self, key: Hashable, now: float) -> float:
        """0 when the request may go ahead, else the seconds until it may (for Retry-After)."""
        with self._lock:
            tokens = self._tokens(key, now)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                if len(self._buckets) > _PRUNE_ABOVE:
                    self._prune(now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate

    def wait(self, key: Hashable, now: float) -> float:
        """What :meth:`take` would answer, taking nothing."""
        with self._lock:
            tokens = self._tokens(key, now)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def _tokens(self, key: Hashable, now: float) -> float:
        tokens, at = self._buckets.get(key, (self.burst, now))
        return min(self.burst, tokens + max(0.0, now - at) * self.rate)

    def _prune(self, now: float) -> None:
        full = [k for k in self._buckets if self._tokens(k, now) >= self.burst]
        for key in full:
            del self._buckets[key]


def retry_after(wait: float) -> str:
    """Whole seconds for the Retry-After header, at least 1."""
    return str(max(1, math.ceil(wait)))
