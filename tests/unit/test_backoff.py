from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from outbox.delivery.backoff import next_attempt_delay


@pytest.mark.parametrize(
    ("attempt", "window"),
    [(1, 30), (2, 60), (3, 120), (4, 240), (9, 7680), (10, 15360), (11, 21600), (50, 21600)],
)
def test_window_doubles_up_to_the_cap(attempt: int, window: float) -> None:
    almost_one = 0.999999
    delay = next_attempt_delay(attempt, base=30, cap=21600, rand=lambda: almost_one)
    assert delay == pytest.approx(window * almost_one)


def test_full_jitter_reaches_zero() -> None:
    assert next_attempt_delay(5, base=30, cap=21600, rand=lambda: 0.0) == 0.0


def test_floor_for_greylisting() -> None:
    assert next_attempt_delay(1, base=30, cap=21600, rand=lambda: 0.1, floor=60) == 60
    assert next_attempt_delay(6, base=30, cap=21600, rand=lambda: 0.5, floor=60) == 480


def test_huge_attempt_numbers_do_not_overflow() -> None:
    assert next_attempt_delay(10_000, base=30, cap=100, rand=lambda: 0.5) == 50


def test_attempts_start_at_one() -> None:
    with pytest.raises(ValueError, match="start at 1"):
        next_attempt_delay(0, base=30, cap=100, rand=lambda: 0.5)


@given(
    attempt=st.integers(1, 200),
    base=st.floats(0.001, 1000),
    cap=st.floats(0.001, 100_000),
    r=st.floats(0, 1, exclude_max=True),
    floor=st.floats(0, 1000),
)
def test_delay_within_bounds(attempt: int, base: float, cap: float, r: float, floor: float) -> None:
    delay = next_attempt_delay(attempt, base=base, cap=cap, rand=lambda: r, floor=floor)
    assert floor <= delay <= max(floor, min(cap, base * 2 ** (attempt - 1)))
