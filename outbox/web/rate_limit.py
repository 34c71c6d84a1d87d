"""A token bucket per API key (pure: the caller passes the time).

Each key may make ``rate`` requests per second on average and ``burst`` at
once; past that the answer is 429 with the seconds to wait. Buckets live in
the ``outbox web`` process: with N processes behind a load balancer a key gets
up to N times the rate.
"""

from __future__ import annotations

import math
import threading


class RateLimiter:
    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = max(burst, 1.0)
        self._buckets: dict[int, tuple[float, float]] = {}  # key id: (tokens, at)
        self._lock = threading.Lock()

    def take(self, key: int, now: float) -> float:
        """0 when the request may go ahead, else the seconds until it may (for Retry-After)."""
        with self._lock:
            tokens, at = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + max(0.0, now - at) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate


def retry_after(wait: float) -> str:
    """Whole seconds for the Retry-After header, at least 1."""
    return str(max(1, math.ceil(wait)))
