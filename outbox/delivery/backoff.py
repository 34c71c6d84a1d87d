"""Retry delays (pure): exponential backoff with full jitter."""

from __future__ import annotations

from collections.abc import Callable


def next_attempt_delay(
    attempt: int,
    *,
    base: float,
    cap: float,
    rand: Callable[[], float],
    floor: float = 0.0,
) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first).

    Full jitter, ``uniform(0, min(cap, base * 2**(attempt-1)))``, spreads a wave
    of retries over the whole window so a relay coming back is not hit by every
    deferred email at once. ``floor`` (greylisting) is a lower bound that the
    jitter never undercuts; ``rand`` returns a float in [0, 1).
    """
    if attempt < 1:
        raise ValueError("attempt numbers start at 1")
    # Cap the exponent before computing: 2**attempt overflows floats past ~1000.
    window = min(cap, base * 2.0 ** min(attempt - 1, 64))
    return max(floor, rand() * window)
