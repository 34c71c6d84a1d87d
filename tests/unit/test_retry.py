from __future__ import annotations

import pytest

from outbox.delivery.retry import RetryPolicy, decide
from outbox.models import Outcome, Status, Verdict

POLICY = RetryPolicy(
    base_seconds=30,
    cap_seconds=21600,
    max_attempts=8,
    max_age_seconds=86400,
    greylist_min_seconds=60,
)


def half() -> float:
    return 0.5


def test_sent_and_failed_are_final() -> None:
    sent = decide(
        Outcome(Verdict.SENT, "250 ok"), attempt=3, age_seconds=10, policy=POLICY, rand=half
    )
    assert sent.status is Status.SENT
    failed = decide(
        Outcome(Verdict.FAILED, "550 5.1.1 unknown"),
        attempt=1,
        age_seconds=1,
        policy=POLICY,
        rand=half,
    )
    assert failed.status is Status.FAILED
    assert failed.reason == "550 5.1.1 unknown"


def test_retry_waits_with_jitter() -> None:
    decision = decide(
        Outcome(Verdict.RETRY, "421 busy"), attempt=3, age_seconds=100, policy=POLICY, rand=half
    )
    assert decision.status is Status.PENDING
    assert decision.delay_seconds == 60  # half of 30 * 2**2
    assert decision.reason == "retry: 421 busy"


def test_greylisting_waits_at_least_the_minimum() -> None:
    decision = decide(
        Outcome(Verdict.RETRY, "450 greylisted", greylisted=True),
        attempt=1,
        age_seconds=0,
        policy=POLICY,
        rand=half,
    )
    assert decision.delay_seconds == 60


@pytest.mark.parametrize("verdict", [Verdict.RETRY, Verdict.UNCERTAIN])
def test_dead_after_the_attempt_limit(verdict: Verdict) -> None:
    decision = decide(
        Outcome(verdict, "421 busy"), attempt=8, age_seconds=1, policy=POLICY, rand=half
    )
    assert decision.status is Status.DEAD
    assert "after 8 attempts" in decision.reason


def test_dead_past_the_age_limit() -> None:
    decision = decide(
        Outcome(Verdict.RETRY, "421 busy"), attempt=2, age_seconds=86400, policy=POLICY, rand=half
    )
    assert decision.status is Status.DEAD
    assert "age" in decision.reason


def test_last_try_happens_at_the_age_limit() -> None:
    decision = decide(
        Outcome(Verdict.RETRY, "421 busy"), attempt=7, age_seconds=86390, policy=POLICY, rand=half
    )
    assert decision.status is Status.PENDING
    assert decision.delay_seconds == 10


def test_uncertain_retries_by_default_and_holds_when_asked() -> None:
    outcome = Outcome(Verdict.UNCERTAIN, "no final reply: timeout at final_reply")
    retried = decide(outcome, attempt=1, age_seconds=1, policy=POLICY, rand=half)
    assert retried.status is Status.PENDING
    held_policy = RetryPolicy(hold_uncertain=True)
    held = decide(outcome, attempt=1, age_seconds=1, policy=held_policy, rand=half)
    assert held.status is Status.HELD
    assert "operator" in held.reason


def test_without_jitter_the_whole_window_is_waited() -> None:
    policy = RetryPolicy(base_seconds=30, cap_seconds=21600, jitter=False)
    decision = decide(
        Outcome(Verdict.RETRY, "421 busy"), attempt=3, age_seconds=1, policy=policy, rand=half
    )
    assert decision.delay_seconds == 120
