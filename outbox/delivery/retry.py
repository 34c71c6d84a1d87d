"""What happens to a row after an attempt (pure)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from outbox.config import Settings
from outbox.delivery.backoff import next_attempt_delay
from outbox.models import Outcome, Status, Verdict


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    base_seconds: float = 30.0
    cap_seconds: float = 6 * 3600.0
    max_attempts: int = 8
    max_age_seconds: float = 24 * 3600.0
    greylist_min_seconds: float = 60.0
    hold_uncertain: bool = False
    jitter: bool = True  # full jitter; off only to measure what jitter buys

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(
            base_seconds=settings.retry_base_seconds,
            cap_seconds=settings.retry_cap_seconds,
            max_attempts=settings.max_attempts,
            max_age_seconds=settings.max_age_seconds,
            greylist_min_seconds=settings.greylist_min_seconds,
            hold_uncertain=settings.on_uncertain == "hold",
            jitter=settings.retry_jitter == "full",
        )


@dataclass(frozen=True, slots=True)
class Decision:
    status: Status
    reason: str
    delay_seconds: float = 0.0  # until next_attempt_at, when status is pending


def decide(
    outcome: Outcome,
    *,
    attempt: int,
    age_seconds: float,
    policy: RetryPolicy,
    rand: Callable[[], float],
) -> Decision:
    """The row's next status after attempt number ``attempt`` had ``outcome``."""
    if outcome.verdict is Verdict.SENT:
        return Decision(Status.SENT, outcome.reason)
    if outcome.verdict is Verdict.FAILED:
        return Decision(Status.FAILED, outcome.reason)
    if outcome.verdict is Verdict.UNCERTAIN and policy.hold_uncertain:
        return Decision(Status.HELD, f"held for an operator: {outcome.reason}")
    if attempt >= policy.max_attempts:
        return Decision(Status.DEAD, f"gave up after {attempt} attempts: {outcome.reason}")
    if age_seconds >= policy.max_age_seconds:
        return Decision(Status.DEAD, f"gave up at age {age_seconds:.0f}s: {outcome.reason}")
    floor = policy.greylist_min_seconds if outcome.greylisted else 0.0
    # A peer's Retry-After is a floor too: coming back sooner only earns another refusal.
    floor = max(floor, outcome.retry_after or 0.0)
    delay = next_attempt_delay(
        attempt,
        base=policy.base_seconds,
        cap=policy.cap_seconds,
        rand=rand if policy.jitter else _whole_window,
        floor=floor,
    )
    # The last try happens at the age limit rather than being skipped.
    delay = min(delay, max(0.0, policy.max_age_seconds - age_seconds))
    return Decision(Status.PENDING, f"retry: {outcome.reason}", delay)


def _whole_window() -> float:
    return 1.0
