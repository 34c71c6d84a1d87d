"""When a webhook delivery is tried again, and what an answer means (pure).

A delivery is tried at once, then again 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and
10 h after each failure (about 28 hours in all, as the Standard Webhooks
providers do); past that its endpoint is paused. 2xx is delivered; 5xx, 408,
429, a timeout or a connection that failed are tried again; 410 disables the
endpoint; any other answer (a redirect too: none is followed) refuses that
delivery for good.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DELAYS = (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0)

Verdict = Literal["delivered", "retry", "refused", "gone"]


@dataclass(frozen=True, slots=True)
class Answer:
    """What became of one attempt: an HTTP status, or None when none came back."""

    status: int | None
    error: str  # why it failed, for `outbox webhooks list` (empty when delivered)


def verdict(answer: Answer) -> Verdict:
    status = answer.status
    if status is None or status >= 500 or status in (408, 429):
        return "retry"
    if 200 <= status < 300:
        return "delivered"
    return "gone" if status == 410 else "refused"


def next_delay(failures: int) -> float | None:
    """Seconds before the next try after ``failures`` failed ones; None: give up."""
    if failures < 1:
        raise ValueError("a delay follows a failure")
    return DELAYS[failures - 1] if failures <= len(DELAYS) else None
